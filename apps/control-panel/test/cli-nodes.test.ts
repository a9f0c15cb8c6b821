import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from './helpers/cli-process.js';
import { RawAgent } from './helpers/raw-agent.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';

// `tether node` as an operator runs it: the real binary against a real panel (real PostgreSQL).

let panel: Panel;
let configDir: string;

beforeAll(async () => {
  panel = await startPanel();
  configDir = mkdtempSync(path.join(os.tmpdir(), 'tether-cli-nodes-'));
}, 60_000);

afterAll(async () => {
  await panel?.close();
  if (configDir) rmSync(configDir, { recursive: true, force: true });
});

describe('tether node', () => {
  const cli = (...args: string[]) => runCli(args, { configDir, env: { TETHER_URL: panel.url, TETHER_TOKEN: panel.operatorToken } });

  it('ls shows each node with its state and labels; label merges (KEY- removes); cordon and uncordon say what they do', async () => {
    const a = await panel.createNode('cli-a');
    await panel.createNode('cli-b');

    const labelled = await cli('node', 'label', 'cli-a', 'zone=eu-1', 'tether.io/ingress=true');
    expect(labelled.code).toBe(0);
    expect(labelled.stdout).toContain('node cli-a labels: zone=eu-1, tether.io/ingress=true');
    expect((await cli('node', 'label', 'cli-a', 'zone-')).stdout).toContain('node cli-a labels: tether.io/ingress=true');

    const cordoned = await cli('node', 'cordon', 'cli-a');
    expect(cordoned.code).toBe(0);
    expect(cordoned.stdout).toMatch(/node cli-a cordoned: nothing new is placed on it/);
    expect((await panel.prisma.node.findUniqueOrThrow({ where: { id: a.id } })).cordoned).toBe(true);

    const listed = await cli('node', 'ls');
    expect(listed.code).toBe(0);
    const rows = listed.stdout.trim().split('\n');
    expect(rows[0]).toMatch(/^NAME\s+STATE\s+SERVICES\s+LABELS$/);
    expect(rows.find((r) => r.startsWith('cli-a'))).toMatch(/^cli-a\s+cordoned\s+0\s+tether\.io\/ingress=true$/);
    expect(rows.find((r) => r.startsWith('cli-b'))).toMatch(/^cli-b\s+schedulable\s+0\s+-$/);

    const json = await cli('node', 'ls', '--json');
    expect(JSON.parse(json.stdout).find((n: { name: string }) => n.name === 'cli-a')).toMatchObject({ cordoned: true, labels: { 'tether.io/ingress': 'true' } });

    const uncordoned = await cli('node', 'uncordon', 'cli-a');
    expect(uncordoned.stdout).toContain('node cli-a takes new placements again; nothing moves back by itself');
    expect((await panel.prisma.node.findUniqueOrThrow({ where: { id: a.id } })).cordoned).toBe(false);
  });

  it('evacuate cordons the node, says what moves and what stays and why; ls shows it evacuating; uncordon ends it', async () => {
    const e = await panel.createNode('cli-e');
    const team = await panel.api('POST', '/v1/teams', { name: 'cli-evac' });
    const svc = await panel.api('POST', '/v1/services', { teamId: team.body.id, name: 'on-e', image: 'registry.example.com/web:1', node: 'cli-e' });
    expect(svc.status).toBe(201);
    const run = await cli('node', 'evacuate', 'cli-e');
    expect(run.code).toBe(0);
    expect(run.stdout).toContain('node cli-e cordoned and evacuating: 0 replica(s) move');
    // No agent speaks allocations here (TETHER_ALLOCATIONS off): the service stays and says why.
    expect(run.stdout).toMatch(/stays on-e: NOT_MANAGED_BY_ALLOCATIONS: /);
    expect(run.stdout).toContain('`tether node uncordon cli-e` ends it; nothing moves back');
    expect(await panel.prisma.node.findUniqueOrThrow({ where: { id: e.id } })).toMatchObject({ cordoned: true, evacuating: true });
    const rows = (await cli('node', 'ls')).stdout.trim().split('\n');
    expect(rows.find((r) => r.startsWith('cli-e'))).toMatch(/^cli-e\s+evacuating\s+1\s+-$/);
    const json = await cli('node', 'evacuate', 'cli-e', '--json');
    expect(JSON.parse(json.stdout)).toMatchObject({ node: { name: 'cli-e', evacuating: true }, moves: [], refused: [{ serviceName: 'on-e', code: 'NOT_MANAGED_BY_ALLOCATIONS' }] });
    expect((await cli('node', 'uncordon', 'cli-e')).code).toBe(0);
    expect(await panel.prisma.node.findUniqueOrThrow({ where: { id: e.id } })).toMatchObject({ cordoned: false, evacuating: false });
    const audit = await panel.prisma.auditEvent.findMany({ where: { action: 'node.evacuate', targetId: e.id } });
    expect(audit).toHaveLength(1);
  });

  it('lost refuses without --confirm (exit 2, nothing changed); with it, says where each service went and which volumes start empty, and what stays', async () => {
    const gone = await panel.createNode('cli-l');
    const spare = await panel.createNode('cli-m');
    const team = await panel.api('POST', '/v1/teams', { name: 'cli-lost' });
    const db = await panel.api('POST', '/v1/services', { teamId: team.body.id, name: 'db', image: 'registry.example.com/db:1', node: 'cli-l', volumes: [{ name: 'data', mountPath: '/var/lib/db' }] });
    const pinned = await panel.api('POST', '/v1/services', { teamId: team.body.id, name: 'pinned', image: 'registry.example.com/web:1', node: 'cli-l' });
    expect([db.status, pinned.status]).toEqual([201, 201]);
    await panel.prisma.service.update({ where: { id: db.body.id }, data: { placement: { nodes: ['cli-l', 'cli-m'], labels: {} } } });
    // A live node to move to: a session of its own.
    const agent = await RawAgent.connect({ url: panel.url, token: spare.token, heartbeatMs: 200 });
    try {
      const refused = await cli('node', 'lost', 'cli-l');
      expect(refused.code).toBe(2);
      expect(refused.stderr).toContain('add --confirm');
      expect((await panel.prisma.node.findUniqueOrThrow({ where: { id: gone.id } })).decommissioned).toBe(false);

      const run = await cli('node', 'lost', 'cli-l', '--confirm');
      expect(run.code).toBe(0);
      expect(run.stdout).toContain('node cli-l declared lost: decommissioned');
      expect(run.stdout).toContain('moved db: cli-l → cli-m; starts on EMPTY volumes: data (/var/lib/db): restore their data from your backup');
      expect(run.stdout).toMatch(/stays pinned: NO_NODE_AVAILABLE: /);
      expect((await panel.prisma.service.findUniqueOrThrow({ where: { id: db.body.id } })).nodeId).toBe(spare.id);
      const again = await cli('node', 'lost', 'cli-l', '--confirm', '--json');
      expect(again.code).toBe(0);
      expect(JSON.parse(again.stdout)).toMatchObject({ node: { name: 'cli-l', decommissioned: true }, moved: [], pending: [{ serviceName: 'pinned' }] });
      expect((await cli('node', 'ls')).stdout.trim().split('\n').find((r) => r.startsWith('cli-l'))).toMatch(/^cli-l\s+decommissioned\s+1\s+-$/);
    } finally {
      agent.close();
    }
  });

  it('usage errors exit 2 and change nothing; an invalid label is the API\'s 400 (exit 4); a customer is refused (exit 4)', async () => {
    await panel.createNode('cli-c');
    for (const args of [['node', 'cordon'], ['node', 'cordon', 'nope'], ['node', 'evacuate'], ['node', 'lost'], ['node', 'lost', 'cli-c'], ['node', 'label', 'cli-c'], ['node', 'label', 'cli-c', 'novalue'], ['node', 'evict', 'cli-c']]) {
      const run = await cli(...args);
      expect(run.code, args.join(' ')).toBe(2);
    }
    const invalid = await cli('node', 'label', 'cli-c', 'bad key=x');
    expect(invalid.code).toBe(4);
    expect(invalid.stderr).toMatch(/VALIDATION_FAILED|invalid|must match/i);
    expect((await panel.prisma.node.findUniqueOrThrow({ where: { name: 'cli-c' } })).labels).toEqual({});

    const team = await panel.api('POST', '/v1/teams', { name: 'cli-nodes' });
    const token = await panel.api('POST', `/v1/teams/${team.body.id}/tokens`, { name: 'cli' });
    const customer = await runCli(['node', 'cordon', 'cli-c'], { configDir, env: { TETHER_URL: panel.url, TETHER_TOKEN: token.body.token } });
    expect(customer.code).toBe(4);
    expect((await panel.prisma.node.findUniqueOrThrow({ where: { name: 'cli-c' } })).cordoned).toBe(false);
  });
});
