import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NodeDetail } from '@tether/fleet-wire';
import { CAPABILITIES } from '@tether/protocol';
import { waitFor } from '@tether/testkit';
import { NODE_ALLOCATIONS_SHOWN } from '../src/dashboard/node-allocations.js';
import { allocationStatus as status } from './helpers/allocation-status.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';

// The fleet page's node view of its allocations (issue 36), real PostgreSQL
// and scripted agents that speak workload.allocations; allocation rows are
// written as the scheduler writes them (its loop stopped, so it places
// nothing over them), statuses sent by the agents over their sessions. The
// node view words each replica as GET /v1/services/:id/status does (a moved
// replica's "moved from …" line included), lists at most 100 with the count
// of the rest in a fixed number of reads, leaves unmanaged services to the
// services table; the rows say evacuating and lost, and carry the node's
// allocation count and newest status time; a node's row counts the services
// whose replicas are on it, not only those homed there.

const REFRESH_MS = 200;
const CAPABLE = [CAPABILITIES.WORKLOAD_ALLOCATIONS];

let panel: Panel;
let cookie: string;
let teamId: string;
const agents: RawAgent[] = [];

beforeAll(async () => {
  panel = await startPanel({ env: { TETHER_FLEET_REFRESH_MS: String(REFRESH_MS), TETHER_ALLOCATIONS: 'on' } });
  await panel.app.scheduler.stop();
  teamId = (await panel.api('POST', '/v1/teams', { name: `fleetview-${process.pid}` })).body.id;
  const res = await fetch(`${panel.url}/dashboard/api/sign-in`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', origin: panel.url },
    body: JSON.stringify({ token: panel.operatorToken }),
  });
  expect(res.status).toBe(200);
  cookie = res.headers.get('set-cookie')!.split(';')[0]!;
}, 60_000);

afterAll(async () => {
  for (const a of agents) a.socket.terminate();
  await panel?.close();
});

async function node(name: string, capabilities?: string[]) {
  const n = await panel.createNode(name);
  if (capabilities) agents.push(await RawAgent.connect({ url: panel.url, token: n.token, node: name, capabilities }));
  return { ...n, agent: agents.at(-1)! };
}

/** A service homed on `home` with a running release, made through the API. */
async function service(home: string, name: string) {
  const svc = await panel.api('POST', '/v1/services', { teamId, name, image: 'busybox:1', node: home });
  expect(svc.status).toBe(201);
  const release = await panel.prisma.deployment.create({ data: { serviceId: svc.body.id, nodeId: svc.body.nodeId, spec: { name, image: 'busybox:1', internalPort: 8080, replicas: 1 }, status: 'running' } });
  return { id: svc.body.id as string, releaseId: release.id };
}

async function place(serviceId: string, nodeId: string, releaseId: string, extra: { desired?: 'run' | 'stop'; cause?: string; movedFrom?: object } = {}) {
  const row = await panel.prisma.allocation.create({
    data: { serviceId, nodeId, releaseId, desired: extra.desired ?? 'run', cause: extra.cause ?? 'scale-up', epoch: 1n, ...(extra.movedFrom ? { movedFrom: extra.movedFrom } : {}) },
  });
  return row;
}

async function detail(nodeId: string): Promise<{ body: NodeDetail; ms: number }> {
  const started = performance.now();
  const res = await fetch(`${panel.url}/dashboard/api/nodes/${nodeId}`, { headers: { cookie } });
  expect(res.status).toBe(200);
  return { body: (await res.json()) as NodeDetail, ms: performance.now() - started };
}

describe("the fleet page's node view lists its allocations", () => {
  let a: Awaited<ReturnType<typeof node>>;
  let b: Awaited<ReturnType<typeof node>>;
  let web: Awaited<ReturnType<typeof service>>;

  beforeAll(async () => {
    a = await node('fv-a', CAPABLE);
    b = await node('fv-b', CAPABLE);
    await panel.settled();
    web = await service(a.name, 'fv-web');
  });

  it('words each replica as the status API does: service, release, state, health, age, "moved from …"', async () => {
    const before = Date.now();
    const onA = await place(web.id, a.id, web.releaseId);
    const moved = await place(web.id, b.id, web.releaseId, {
      cause: 'node-lost',
      movedFrom: { allocationId: 'gone', nodeId: 'n-x1', nodeName: 'x1', unreachableSince: '2026-12-05T03:10:00.000Z', teardownReason: 'IDLE_TIMEOUT: no frame for 1500 ms' },
    });
    const leaving = await place(web.id, b.id, web.releaseId, { desired: 'stop' });
    const after = Date.now();
    a.agent.send({ type: 'allocations.status', id: 'fv-1', ref: null, allocations: [status(onA.id, web.id, web.releaseId, { state: 'failed', health: 'none', runningDeploymentId: null, containerId: null, code: 'IMAGE_PULL_FAILED', reason: 'no such image' })] });
    b.agent.send({ type: 'allocations.status', id: 'fv-2', ref: null, allocations: [status(moved.id, web.id, web.releaseId), status(leaving.id, web.id, web.releaseId, { state: 'draining', health: 'none' })] });
    type Entry = { allocationId: string; state: string; health: string | null; code: string | null; reason: string | null; deploymentId: string | null; movedFrom: { message: string } | null };
    const api = await waitFor(
      async () => {
        const s = await panel.api('GET', `/v1/services/${web.id}/status`);
        const entries = s.body.allocations as Entry[];
        return entries.length === 3 && entries.every((e) => e.state !== 'pending') ? entries : undefined;
      },
      { timeoutMs: 5_000 },
    );

    const { body, ms } = await detail(b.id);
    console.log(`node view of fv-b: ${body.allocations!.items.length} allocations in ${ms.toFixed(0)} ms`);
    expect(body.allocations!.more).toBe(0);
    expect(body.allocations!.items.map((x) => x.allocationId)).toEqual([moved.id, leaving.id]);
    for (const item of body.allocations!.items) {
      const entry = api.find((e) => e.allocationId === item.allocationId)!;
      expect(item).toMatchObject({ serviceId: web.id, service: 'fv-web', state: entry.state, health: entry.health, code: entry.code, reason: entry.reason, deploymentId: web.releaseId });
      expect(item.movedFrom).toBe(entry.movedFrom?.message ?? null);
      expect(item.placedAt).toBeGreaterThanOrEqual(before - 1_000);
      expect(item.placedAt).toBeLessThanOrEqual(after + 1_000);
      expect(item.statusAgeMs).not.toBeNull();
    }
    const [runHere, stopHere] = body.allocations!.items;
    expect(runHere).toMatchObject({ desired: 'run', state: 'running', health: 'healthy' });
    expect(runHere!.movedFrom).toMatch(/^moved from x1 \(unreachable since 2026-12-05T03:10:00.000Z, torn down for IDLE_TIMEOUT: no frame for 1500 ms\) to fv-b at \S+$/);
    expect(stopHere).toMatchObject({ desired: 'stop', state: 'draining', movedFrom: null });

    const onHome = (await detail(a.id)).body.allocations!.items;
    expect(onHome).toEqual([expect.objectContaining({ allocationId: onA.id, state: 'failed', code: 'IMAGE_PULL_FAILED', reason: 'no such image', movedFrom: null })]);
  });

  it("a node's row counts the services whose replicas run on it, not only those homed there", async () => {
    // fv-web is homed on fv-a; its run allocation on fv-b makes it one of fv-b's services.
    await waitFor(async () => (await detail(b.id)).body.row.services.desired === 1, { timeoutMs: REFRESH_MS + 3_000 });
    expect((await detail(a.id)).body.row.services.desired).toBe(1);
    // The row carries the node's allocation count and its newest status time: the page reads the node again when either moves.
    const [newest] = await panel.prisma.allocation.findMany({ where: { nodeId: b.id }, orderBy: { statusAt: { sort: 'desc', nulls: 'last' } }, take: 1 });
    expect((await detail(b.id)).body.row.allocations).toEqual({ count: 2, lastStatusAt: newest!.statusAt!.getTime() });
  });

  it('lists at most 100 allocations of a node, with the count of the rest', async () => {
    const c = await node('fv-c');
    const many = await service(a.name, 'fv-many');
    const extra = 5;
    await panel.prisma.allocation.createMany({
      data: Array.from({ length: NODE_ALLOCATIONS_SHOWN + extra }, () => ({ serviceId: many.id, nodeId: c.id, releaseId: many.releaseId, desired: 'run', cause: 'scale-up', epoch: 1n })),
    });
    const { body, ms } = await detail(c.id);
    console.log(`node view of fv-c: ${body.allocations!.items.length} shown, ${body.allocations!.more} more, in ${ms.toFixed(0)} ms`);
    expect(NODE_ALLOCATIONS_SHOWN).toBe(100);
    expect(body.allocations!.items).toHaveLength(100);
    expect(body.allocations!.more).toBe(extra);
    // fv-c never connected: every replica there is unknown, as the status API says it.
    expect(new Set(body.allocations!.items.map((x) => `${x.state} ${x.code}`))).toEqual(new Set(['unknown NODE_UNREACHABLE']));
    await waitFor(async () => (await detail(c.id)).body.row.allocations?.count === NODE_ALLOCATIONS_SHOWN + extra, { timeoutMs: REFRESH_MS + 3_000 });
    expect((await detail(c.id)).body.row.allocations!.lastStatusAt).toBeNull();
  });

  it("leaves a service its home node does not manage by allocations to the services table (the status API lists none of its replicas)", async () => {
    await node('fv-old', []);
    await panel.settled();
    const old = await service('fv-old', 'fv-legacy');
    await place(old.id, b.id, old.releaseId, { cause: 'migrated' });
    expect((await panel.api('GET', `/v1/services/${old.id}/status`)).body.allocations).toEqual([]);
    const items = (await detail(b.id)).body.allocations!.items;
    expect(items.map((x) => x.service)).not.toContain('fv-legacy');
  });

  it('rows say evacuating, and lost with when, within a refresh', async () => {
    const d = await node('fv-d');
    const e = await node('fv-e');
    expect((await panel.api('POST', `/v1/nodes/${d.id}/evacuate`)).status).toBe(200);
    expect((await panel.api('POST', `/v1/nodes/${e.id}/lost`, { confirm: true })).status).toBe(200);
    const changed = Date.now();
    const rowD = await waitFor(async () => ((await detail(d.id)).body.row.evacuating ? (await detail(d.id)).body.row : undefined), { timeoutMs: REFRESH_MS + 3_000 });
    const rowE = await waitFor(async () => ((await detail(e.id)).body.row.lostAt ? (await detail(e.id)).body.row : undefined), { timeoutMs: REFRESH_MS + 3_000 });
    expect(Date.now() - changed).toBeLessThanOrEqual(REFRESH_MS * 2 + 1_000);
    expect(rowD).toMatchObject({ cordoned: true, evacuating: true, lostAt: null });
    const lost = await panel.prisma.node.findUniqueOrThrow({ where: { id: e.id } });
    expect(rowE).toMatchObject({ state: 'decommissioned', evacuating: false, lostAt: lost.lostAt!.getTime() });
    expect((await detail(a.id)).body.row).toMatchObject({ evacuating: false, lostAt: null });
  });
});
