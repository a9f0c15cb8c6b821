import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, spawnProcess, waitFor, type ManagedProcess } from '@tether/testkit';
import { generateToken, hashToken } from '../src/domain/tokens.js';
import { startAgentProcess } from './helpers/agent-process.js';
import { useMigratedDatabase } from './helpers/migrated-database.js';

// Rolling restart of three panel processes (SIGTERM, start again with the same
// id and port, one at a time) while real agents that know all three URLs stay
// connected and a steady stream of deploys goes to whichever panel answers:
// every answer is 202, 503 or 504 with the documented body, no deployment is
// lost or left pending, and every node is connected again at the end.

const PANEL_MAIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'main.js');
const OPERATOR = 'rolling-restart-operator-token';
const env = {
  TETHER_PANEL_LEASE_MS: '1500',
  TETHER_ACK_TIMEOUT_MS: '1000',
  TETHER_SESSION_IDLE_MS: '5000',
  TETHER_PING_INTERVAL_MS: '1000',
  TETHER_LOG_LEVEL: 'warn',
  TETHER_ADMIN_TOKEN: OPERATOR,
};

const db = useMigratedDatabase();
const cleanup: (() => Promise<unknown> | unknown)[] = [];

afterAll(async () => {
  for (const f of cleanup.reverse()) await f();
});

interface PanelProc {
  id: string;
  port: number;
  dataDir: string;
  child: ManagedProcess | undefined;
}

async function launch(p: PanelProc): Promise<void> {
  p.child = spawnProcess(process.execPath, [PANEL_MAIN], {
    env: { ...env, DATABASE_URL: db.url, TETHER_DATA_DIR: p.dataDir, TETHER_PORT: String(p.port), TETHER_PANEL_ID: p.id },
  });
  await p.child.waitForOutput(/listening on /, 30_000);
}

describe('rolling restart of three panels', () => {
  it('loses no deployment: every answer is 202, 503 or 504 with its code, none left pending, every node back', async () => {
    if (!existsSync(PANEL_MAIN)) throw new Error(`build the panel first: ${PANEL_MAIN} is missing`);
    const panels: PanelProc[] = [];
    for (const id of ['roll-a', 'roll-b', 'roll-c']) {
      const dataDir = await mkdtemp(path.join(os.tmpdir(), 'tether-roll-'));
      cleanup.push(() => rm(dataDir, { recursive: true, force: true }));
      panels.push({ id, port: await freePort(), dataDir, child: undefined });
    }
    await Promise.all(panels.map(launch));
    cleanup.push(() => Promise.all(panels.map((p) => p.child?.stop(2_000))));
    const urls = panels.map((p) => `http://127.0.0.1:${p.port}`);

    const team = await db.prisma.team.create({ data: { name: 'rolling' } });
    const nodes: { id: string; serviceId: string }[] = [];
    for (let i = 0; i < 3; i++) {
      const token = generateToken('node');
      const node = await db.prisma.node.create({ data: { name: `roll-node-${i}`, tokenHash: hashToken(token) } });
      const service = await db.prisma.service.create({ data: { teamId: team.id, name: `roll-svc-${i}`, image: 'tether-test/busybox:1', internalPort: 8080, replicas: 1, nodeId: node.id } });
      nodes.push({ id: node.id, serviceId: service.id });
      const agent = await startAgentProcess({ panelUrl: urls.join(','), token, nodeName: node.name });
      cleanup.push(() => agent.destroy());
    }
    const connected = async () => (await db.prisma.nodeOwner.count({ where: { nodeId: { in: nodes.map((n) => n.id) } } })) === nodes.length;
    await waitFor(connected, { timeoutMs: 15_000 });

    // A steady stream of deploys, each to the next panel in turn; a refused connection (panel down) tries the next.
    const answers: { status: number; code: string | null; id: string | null }[] = [];
    let refused = 0;
    let stop = false;
    const load = (async () => {
      let k = 0;
      while (!stop) {
        const target = nodes[k % nodes.length]!;
        const url = urls[k % urls.length]!;
        k++;
        try {
          const res = await fetch(`${url}/v1/services/${target.serviceId}/deployments`, {
            method: 'POST',
            headers: { authorization: `Bearer ${OPERATOR}`, 'content-type': 'application/json' },
            body: '{}',
          });
          const text = await res.text();
          const body = JSON.parse(text) as { id?: string; error?: { code: string } };
          answers.push({ status: res.status, code: body.error?.code ?? null, id: body.id ?? null });
        } catch {
          refused++;
        }
        await new Promise((r) => setTimeout(r, 50));
      }
    })();

    for (const p of panels) {
      await p.child!.stop(5_000);
      await new Promise((r) => setTimeout(r, 500));
      await launch(p);
      // Wait until every node is owned by a live panel again before the next restart.
      await waitFor(async () => {
        const owners = await db.prisma.$queryRaw<{ n: number }[]>`
          SELECT count(*)::int AS n FROM node_owners w JOIN panels p ON p.id = w.panel_id
          WHERE p.lease_until > now() AND w.node_id = ANY(${nodes.map((n) => n.id)}::text[])`;
        return owners[0]?.n === nodes.length;
      }, { timeoutMs: 15_000 });
    }
    await new Promise((r) => setTimeout(r, 1_000));
    stop = true;
    await load;

    const byStatus = new Map<string, number>();
    for (const a of answers) byStatus.set(`${a.status} ${a.code ?? ''}`.trim(), (byStatus.get(`${a.status} ${a.code ?? ''}`.trim()) ?? 0) + 1);
    console.log(`rolling restart: ${answers.length} answers ${JSON.stringify(Object.fromEntries(byStatus))}, ${refused} refused connections`);
    expect(answers.length).toBeGreaterThan(20);
    for (const a of answers) {
      if (a.status === 202) expect(a.code).toBeNull();
      else if (a.status === 503) expect(['NODE_UNREACHABLE', 'PANEL_LEASE_LOST', 'DATABASE_UNAVAILABLE', 'NOT_READY']).toContain(a.code);
      else if (a.status === 504) expect(a.code).toBe('ACK_TIMEOUT');
      else expect.fail(`unexpected answer ${a.status} ${a.code}`);
    }
    expect(answers.filter((a) => a.status === 202).length).toBeGreaterThan(answers.length / 2);
    // No deployment left pending; every 202 is a row the agent received (delivered or further), none lost.
    await waitFor(async () => (await db.prisma.deployment.count({ where: { status: 'pending' } })) === 0, { timeoutMs: 5_000 });
    const accepted = answers.filter((a) => a.status === 202).map((a) => a.id!);
    const rows = await db.prisma.deployment.findMany({ where: { id: { in: accepted } }, select: { status: true } });
    expect(rows).toHaveLength(accepted.length);
    for (const r of rows) expect(['delivered', 'running', 'failed', 'superseded']).toContain(r.status);
    // A refusal before any row (NOT_READY while a panel stops) made none; every other answer made one.
    const madeRows = answers.filter((a) => a.code !== 'NOT_READY' && a.code !== 'DATABASE_UNAVAILABLE').length;
    expect(await db.prisma.deployment.count()).toBeGreaterThanOrEqual(madeRows);
    await waitFor(connected, { timeoutMs: 10_000 });
  }, 120_000);
});
