import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { generateToken, hashToken } from '../src/domain/tokens.js';
import { sleep, waitFor } from '@tether/testkit';
import { startPanel, usePanels, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';

// Several panels: a panel that does not hold a node's session answers its
// frame age from the owner, asked over the internal URL (one batched request
// per owner per read), within 2 s of the owner's own answer, while heartbeats
// write nothing to the database; an owner that does not answer leaves its
// report row as the evidence, named as such; an owner whose lease ended makes
// the node unknown. The internal surface takes only a panel's credential.

const LEASE_MS = 1_500;
const HEARTBEAT_MS = 300;
const PEER_TIMEOUT_MS = 1_000;
const env = {
  TETHER_PANEL_LEASE_MS: String(LEASE_MS),
  TETHER_SESSION_IDLE_MS: '12000',
  // Pings rarer than the silences below: the only frames are the heartbeats the test sends.
  TETHER_PING_INTERVAL_MS: '10000',
  TETHER_HEARTBEAT_INTERVAL_MS: String(HEARTBEAT_MS),
  TETHER_PANEL_PEER_TIMEOUT_MS: String(PEER_TIMEOUT_MS),
  TETHER_FLEET_REFRESH_MS: '200',
};

const { panels: [a, b], cleanup, databaseUrl } = usePanels(['a', 'b'], env) as { panels: [Panel, Panel]; cleanup: (() => unknown)[]; databaseUrl: () => string };

type Row = { nodeId: string; state: string; lastFrameAgeMs: number | null; panelId: string | null; source: string | null; heartbeats: number; lastHeartbeatSeq: number | null };
const rowOn = async (panel: Panel, nodeId: string) => ((await panel.api('GET', '/v1/sessions')).body.sessions as Row[]).find((r) => r.nodeId === nodeId)!;
type Status = { state: string; evidence: { sessionId: string; lastFrameAgeMs: number; panelId?: string; source?: string } | null; containers: unknown[] };
const statusOn = async (panel: Panel, serviceId: string) => (await panel.api('GET', `/v1/services/${serviceId}/status`)).body as Status;

/** The owner's report row of the node says connected, with its one container. */
const containerInRow = async (nodeId: string) =>
  (await a.prisma.$queryRaw<{ n: number }[]>`SELECT jsonb_array_length(report->'containers') AS n FROM node_reports WHERE node_id = ${nodeId} AND state = 'connected'`)[0]?.n === 1;

/** A node on `owner` with a service running on it, heartbeating every HEARTBEAT_MS with an unchanging report. */
async function runningNodeOn(owner: Panel, name: string) {
  const node = await a.createNode(name);
  const service = await a.createService(node.id);
  const agent = await RawAgent.connect({ url: owner.url, token: node.token, node: node.name });
  cleanup.push(() => agent.close());
  const containers = [
    { containerId: `c-${name}`, serviceId: service.id, deploymentId: 'd1', name: 'x', state: 'running' as const, exitCode: null, health: 'none' as const, restartCount: 0, since: new Date().toISOString() },
  ];
  let timer: NodeJS.Timeout | undefined;
  const beat = {
    start: () => {
      agent.heartbeat(containers);
      timer = setInterval(() => agent.heartbeat(containers), HEARTBEAT_MS);
    },
    stop: () => clearInterval(timer),
  };
  cleanup.push(() => beat.stop());
  beat.start();
  return { node, service, agent, beat };
}

describe('frame ages on a panel that does not hold the session', () => {
  it('within 2 s of the owner\'s, both ways, through heartbeats and a silence; heartbeats write no report row', async () => {
    const onB = await runningNodeOn(b, 'age-on-b');
    const onA = await runningNodeOn(a, 'age-on-a');
    // The first request between two panels is slow (connections, code loaded and compiled once): wait until each answers.
    for (const [reader, n] of [[a, onB], [b, onA]] as const) {
      await waitFor(async () => (await statusOn(reader, n.service.id)).evidence?.source === 'owner', { timeoutMs: 5_000 });
    }
    // The row has the container (the change after hello is written within a second): from now on nothing changes.
    await waitFor(() => containerInRow(onB.node.id), { timeoutMs: 3_000 });
    const updatedAt = async () => (await a.prisma.$queryRaw<{ u: Date }[]>`SELECT updated_at AS u FROM node_reports WHERE node_id = ${onB.node.id}`)[0]!.u.getTime();
    const writes = new Set<number>([await updatedAt()]);
    const worst = { diff: 0 };
    // Owner first, then the other panel: the other's age may be older by the time between the reads, never younger.
    const compare = async (owner: Panel, other: Panel, n: { node: { id: string }; service: { id: string } }, ownerId: string) => {
      const t0 = performance.now();
      const mine = await rowOn(owner, n.node.id);
      const t1 = performance.now();
      const theirs = await rowOn(other, n.node.id);
      const t2 = performance.now();
      expect(theirs).toMatchObject({ state: 'connected', panelId: ownerId, source: 'owner' });
      expect(mine.source).toBe('session');
      expect(theirs.heartbeats).toBeGreaterThanOrEqual(mine.heartbeats);
      expect(theirs.lastHeartbeatSeq).not.toBeNull();
      const diff = theirs.lastFrameAgeMs! - mine.lastFrameAgeMs!;
      worst.diff = Math.max(worst.diff, Math.abs(diff));
      expect(Math.abs(diff)).toBeLessThan(2_000);
      // The other panel counts from when it asked the owner: older than the owner's own by at most the time between the reads plus that round trip.
      return { diff, most: t2 - t0 + (t2 - t1) };
    };
    const until = Date.now() + 3_000;
    while (Date.now() < until) {
      await compare(b, a, onB, 'panel-b');
      await compare(a, b, onA, 'panel-a');
      writes.add(await updatedAt());
      await sleep(100);
    }
    // At most the 10 s refresh of an unchanged report in 3 s; one write per heartbeat would be about ten.
    expect(writes.size).toBeLessThanOrEqual(2);

    // Silence: no frame for 3 s. The ages grow alike on both panels; the other panel's is never younger.
    onB.beat.stop();
    onA.beat.stop();
    await sleep(2_500);
    for (const [owner, other, n, id] of [[b, a, onB, 'panel-b'], [a, b, onA, 'panel-a']] as const) {
      const { diff, most } = await compare(owner, other, n, id);
      expect(diff).toBeGreaterThanOrEqual(-5);
      expect(diff).toBeLessThanOrEqual(most + 5);
      const mine = await rowOn(owner, n.node.id);
      expect(mine.lastFrameAgeMs!).toBeGreaterThanOrEqual(2_400);
      // Service status carries the same evidence: the owner's answer, named.
      const s = await statusOn(other, n.service.id);
      expect(s).toMatchObject({ state: 'running', evidence: { panelId: id, source: 'owner' } });
      expect(s.evidence!.lastFrameAgeMs).toBeGreaterThanOrEqual(mine.lastFrameAgeMs!);
      expect(s.evidence!.lastFrameAgeMs).toBeLessThan(mine.lastFrameAgeMs! + 2_000);
      expect(s.containers).toHaveLength(1);
    }
    console.log(`largest frame-age difference between owner and other panel over 3 s of heartbeats: ${worst.diff} ms`);
    onB.beat.start();
    onA.beat.start();
  }, 30_000);

  it('an owner that does not answer (internal URL accepts and stays silent): its report row, named, within the peer timeout; its lease ended: unknown', async () => {
    // A listener that accepts and never answers: the read must give up after TETHER_PANEL_PEER_TIMEOUT_MS.
    const sockets = new Set<net.Socket>();
    const silent = net.createServer((s) => void sockets.add(s));
    await new Promise<void>((r) => silent.listen(0, '127.0.0.1', r));
    cleanup.push(() => new Promise((r) => { for (const s of sockets) s.destroy(); silent.close(r); }));
    const port = (silent.address() as net.AddressInfo).port;
    const d = await startPanel({ databaseUrl: databaseUrl(), env: { ...env, TETHER_PANEL_ID: 'panel-d', TETHER_PANEL_INTERNAL_URL: `http://127.0.0.1:${port}` } });
    cleanup.push(() => d.close());
    const onD = await runningNodeOn(d, 'age-on-d');
    await waitFor(async () => (await statusOn(d, onD.service.id)).state === 'running', { timeoutMs: 3_000 });
    // The first read waits for the owner up to the timeout, then answers from the row; it still says running, from the row.
    await waitFor(() => containerInRow(onD.node.id), { timeoutMs: 3_000 });
    const started = performance.now();
    const s = await statusOn(a, onD.service.id);
    const ms = performance.now() - started;
    expect(s).toMatchObject({ state: 'running', evidence: { panelId: 'panel-d', source: 'report-row', sessionId: onD.agent.welcome.sessionId } });
    expect(ms).toBeGreaterThanOrEqual(PEER_TIMEOUT_MS - 20);
    expect(ms).toBeLessThan(PEER_TIMEOUT_MS + 1_000);
    expect(await rowOn(a, onD.node.id)).toMatchObject({ state: 'connected', panelId: 'panel-d', source: 'report-row' });
    // The owner's lease ends (it stops renewing): no stale "running" from its row on any other panel.
    await d.app.cluster!.lease.stop();
    const endedAt = Date.now();
    await waitFor(async () => (await statusOn(a, onD.service.id)).state === 'unknown', { timeoutMs: 2_000, intervalMs: 50 });
    expect(Date.now() - endedAt).toBeLessThan(2_000);
    expect((await rowOn(a, onD.node.id)).state).not.toBe('connected');
  }, 30_000);
});

describe('the internal surface', () => {
  it('refuses requests without a panel credential, with customer, operator and node tokens, and with a wrong secret', async () => {
    const node = await a.createNode('internal-refusals');
    const service = await a.createService(node.id);
    const customer = generateToken('customer');
    await a.prisma.apiToken.create({ data: { name: 'customer', role: 'customer', teamId: service.teamId, tokenHash: hashToken(customer) } });
    const headers: [string, Record<string, string>][] = [
      ['none', {}],
      ['customer token', { authorization: `Bearer ${customer}` }],
      ['operator token', { authorization: `Bearer ${b.operatorToken}` }],
      ['node token', { authorization: `Bearer ${node.token}` }],
      ['wrong secret', { authorization: `TetherPanel panel-a:${'x'.repeat(43)}` }],
      ['unknown panel', { authorization: `TetherPanel panel-zz:${'x'.repeat(43)}` }],
    ];
    for (const [what, h] of headers) {
      const reports = await fetch(`${b.url}/internal/v1/live-reports`, { method: 'POST', headers: { ...h, 'content-type': 'application/json' }, body: JSON.stringify({ nodeIds: [node.id], containers: true }) });
      const logs = await fetch(`${b.url}/internal/v1/services/${service.id}/logs`, { headers: h });
      for (const res of [reports, logs]) {
        expect(res.status, what).toBe(401);
        expect(res.headers.get('www-authenticate')).toBe('TetherPanel');
        expect(((await res.json()) as { error: { code: string } }).error.code).toBe('UNAUTHORIZED');
      }
    }
    // Not in the API's document.
    const doc = (await (await fetch(`${b.url}/openapi.json`)).text());
    expect(doc).not.toContain('/internal/');
  });
});
