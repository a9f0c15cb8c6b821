import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAPABILITIES, type AllocationStatus, type PanelMessage } from '@tether/protocol';
import { waitFor } from '@tether/testkit';
import { sqlOf } from '../src/db/database.js';
import { generateKey } from '../src/secrets/keyring.js';
import { PrismaFactWriter } from '../src/session-writes/fact-writer.js';
import { allocationStatus as statusOf } from './helpers/allocation-status.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';

// The session side of allocations (issue 36), real PostgreSQL and scripted
// WebSocket agents: a capable agent gets its node's `allocations` set (with
// each release's spec, secrets in) at the open and on changed(), never
// `workloads`; an agent without the capability still gets `workloads` and
// never `allocations`; the open records the agreed capabilities on the node
// row; allocations.status is written only where it changed, fenced by the
// session's generation, with `removed` for dropped stop allocations; the
// status API answers per allocation, `unknown` on a node without a session.

type Allocations = Extract<PanelMessage, { type: 'allocations' }>;
const KEY = generateKey();
const PLANTED = `planted-${randomBytes(8).toString('hex')}`;

let panel: Panel;
let teamId: string;
const agents: RawAgent[] = [];

beforeAll(async () => {
  panel = await startPanel({ env: { TETHER_SECRETS_KEY: KEY, TETHER_ALLOCATIONS: 'on' } });
  // These tests write allocation rows as the scheduler would; the panel's own scheduler, stopped, places nothing over them.
  await panel.app.scheduler.stop();
  teamId = (await panel.api('POST', '/v1/teams', { name: `alloc-${process.pid}` })).body.id;
});
afterAll(async () => {
  for (const a of agents) a.socket.terminate();
  await panel?.close();
});

async function connect(node: { name: string; token: string }, capabilities: string[]) {
  const agent = await RawAgent.connect({ url: panel.url, token: node.token, node: node.name, capabilities });
  agents.push(agent);
  return agent;
}

const CAPABLE = [CAPABILITIES.SECRETS, CAPABILITIES.WORKLOAD_ALLOCATIONS];
const sql = () => sqlOf(panel.prisma);

/** A service on `nodeId` (its home node) with one deployment whose spec carries a secret reference. */
async function serviceWithRelease(nodeName: string, name: string) {
  const svc = await panel.api('POST', '/v1/services', { teamId, name, image: 'busybox:1', node: nodeName, env: { PLAIN: 'p' }, secrets: { PASS: PLANTED } });
  expect(svc.status).toBe(201);
  const nodeId = svc.body.nodeId as string;
  const spec = { name, image: 'busybox:1', env: { PLAIN: 'p' }, internalPort: 8080, replicas: 2, secrets: [{ name: 'PASS', version: 1 }] };
  const dep = await panel.prisma.deployment.create({ data: { serviceId: svc.body.id, nodeId, spec, status: 'running' } });
  return { serviceId: svc.body.id as string, nodeId, releaseId: dep.id };
}

async function allocation(serviceId: string, nodeId: string, releaseId: string | null, desired: 'run' | 'stop' = 'run') {
  const row = await panel.prisma.allocation.create({ data: { serviceId, nodeId, releaseId, desired, cause: 'scale-up', epoch: 1n } });
  return row.id;
}

async function rowsOf(nodeId: string) {
  return sql().rows<{ id: string; status: Record<string, unknown> | null; status_at: Date | null; status_session: string | null }>(
    `SELECT id, status, status_at, status_session FROM allocations WHERE node_id = $1 ORDER BY id`,
    [nodeId],
  );
}

describe('allocations over the session', () => {
  let a: { id: string; name: string; token: string };
  let svc: Awaited<ReturnType<typeof serviceWithRelease>>;
  let run1: string;
  let run2: string;
  let stopped: string;
  let unreleased: string;
  let agentA: RawAgent;

  beforeAll(async () => {
    a = await panel.createNode('alloc-a');
    svc = await serviceWithRelease(a.name, 'alloc-web');
    run1 = await allocation(svc.serviceId, a.id, svc.releaseId);
    run2 = await allocation(svc.serviceId, a.id, svc.releaseId);
    stopped = await allocation(svc.serviceId, a.id, svc.releaseId, 'stop');
    unreleased = await allocation(svc.serviceId, a.id, null);
  });

  it('sends a capable agent its set with the release spec (secrets in) at the open, never workloads, and records its capabilities', async () => {
    agentA = await connect(a, CAPABLE);
    expect(agentA.welcome.capabilities).toEqual(CAPABLE);
    const frame = await agentA.waitFor<Allocations>((m) => m.type === 'allocations');
    expect(frame.allocations.map((x) => x.allocationId).sort()).toEqual([run1, run2].sort());
    expect(frame.allocations.every((x) => x.deploymentId === svc.releaseId && x.serviceId === svc.serviceId)).toBe(true);
    expect(frame.releases).toHaveLength(1);
    expect(frame.releases[0]).toMatchObject({ serviceId: svc.serviceId, deploymentId: svc.releaseId, serviceName: 'alloc-web', image: 'busybox:1', env: { PLAIN: 'p' }, port: 8080, secrets: { PASS: PLANTED } });
    expect(frame.releases[0]).not.toHaveProperty('replicas');
    expect(frame.releases[0]).not.toHaveProperty('secretRefs');
    // The allocation without a release is left out and kept for status.
    expect(panel.app.agentSide.allocations.leftOut(a.id).get(unreleased)).toMatchObject({ reason: 'RELEASE_UNKNOWN' });
    await panel.settled();
    const [node] = await sql().rows<{ capabilities: string[] }>(`SELECT capabilities FROM nodes WHERE id = $1`, [a.id]);
    expect(node!.capabilities).toEqual([...CAPABLE].sort());
    // A REST change on the node (it emits workloads.changed) sends a new allocations set, and still no workloads.
    await panel.api('PATCH', `/v1/services/${svc.serviceId}`, { env: { PLAIN: 'q' } });
    await waitFor(() => agentA.received.filter((m) => m.type === 'allocations').length >= 2);
    expect(agentA.received.some((m) => m.type === 'workloads')).toBe(false);
  });

  it('changed(nodeId) sends the new set, once for changes that arrive together', async () => {
    const before = agentA.received.filter((m) => m.type === 'allocations').length;
    const added = await allocation(svc.serviceId, a.id, svc.releaseId);
    // Three changes at once: the send queued first reads the rows when it starts, so one set carries them all.
    for (let i = 0; i < 3; i++) panel.app.agentSide.allocations.changed(a.id, `test: scale-up ${i}`);
    const frame = await agentA.waitFor<Allocations>((m) => m.type === 'allocations' && m.allocations.some((x) => x.allocationId === added));
    expect(frame.allocations).toHaveLength(3);
    await new Promise((r) => setTimeout(r, 200));
    expect(agentA.received.filter((m) => m.type === 'allocations').length).toBe(before + 1);
  });

  it('an agent without the capability gets workloads and never allocations; its node row records what it agreed', async () => {
    const b = await panel.createNode('alloc-b');
    const other = await serviceWithRelease(b.name, 'alloc-old');
    await allocation(other.serviceId, b.id, other.releaseId);
    const agentB = await connect(b, [CAPABILITIES.SECRETS]);
    expect(agentB.welcome.capabilities).toEqual([CAPABILITIES.SECRETS]);
    await agentB.waitFor((m) => m.type === 'workloads');
    panel.app.agentSide.allocations.changed(b.id, 'test: changed on an old agent');
    await agentB.waitFor((m) => m.type === 'routing.map');
    await new Promise((r) => setTimeout(r, 300));
    expect(agentB.received.some((m) => m.type === 'allocations')).toBe(false);
    await panel.settled();
    const [node] = await sql().rows<{ capabilities: string[] }>(`SELECT capabilities FROM nodes WHERE id = $1`, [b.id]);
    expect(node!.capabilities).toEqual([CAPABILITIES.SECRETS]);
  });

  it('workload.fence is agreed only with hello.fence, whose deadline and stop grace the node row records at the open', async () => {
    const FENCE = [...CAPABLE, CAPABILITIES.WORKLOAD_FENCE];
    const f = await panel.createNode('alloc-fence');
    const fenced = await RawAgent.connect({ url: panel.url, token: f.token, node: f.name, capabilities: FENCE, fence: { afterMs: 45_000, stopTimeoutMs: 7_000 } });
    agents.push(fenced);
    expect(fenced.welcome.capabilities).toEqual(FENCE);
    await panel.settled();
    const read = async () => (await sql().rows<{ capabilities: string[]; fence_after_ms: number | null; fence_stop_timeout_ms: number | null }>(`SELECT capabilities, fence_after_ms, fence_stop_timeout_ms FROM nodes WHERE id = $1`, [f.id]))[0]!;
    expect(await read()).toEqual({ capabilities: [...FENCE].sort(), fence_after_ms: 45_000, fence_stop_timeout_ms: 7_000 });
    fenced.close();
    // Named without its timing: not agreed, and the next open clears what the last one recorded.
    const bare = await connect(f, FENCE);
    expect(bare.welcome.capabilities).toEqual(CAPABLE);
    await panel.settled();
    expect(await read()).toEqual({ capabilities: [...CAPABLE].sort(), fence_after_ms: null, fence_stop_timeout_ms: null });
  });

  it('records allocations.status only where it changed, removed for a dropped stop allocation, then calls the hook', async () => {
    const hooked: string[] = [];
    panel.app.agentSide.allocations.onStatusStored((nodeId) => hooked.push(nodeId));
    const sessionId = agentA.welcome.sessionId;
    const statuses = [
      statusOf(run1, svc.serviceId, svc.releaseId),
      statusOf(run2, svc.serviceId, svc.releaseId, { state: 'failed', health: 'none', runningDeploymentId: null, containerId: null, code: 'IMAGE_PULL_FAILED', reason: 'no such image' }),
    ];
    agentA.send({ type: 'allocations.status', id: 'st-1', ref: null, allocations: statuses });
    await waitFor(() => hooked.length === 1);
    await panel.settled();
    const first = new Map((await rowsOf(a.id)).map((r) => [r.id, r]));
    expect(first.get(run1)!.status).toMatchObject({ state: 'running', health: 'healthy', runningDeploymentId: svc.releaseId, deploymentId: svc.releaseId });
    expect(first.get(run1)!.status).not.toHaveProperty('allocationId');
    expect(first.get(run1)!.status_session).toBe(sessionId);
    expect(first.get(run2)!.status).toMatchObject({ state: 'failed', code: 'IMAGE_PULL_FAILED', reason: 'no such image' });
    expect(first.get(stopped)!.status).toEqual({ state: 'removed' });
    expect(first.get(unreleased)!.status).toBeNull();
    expect(hooked).toEqual([a.id]);

    // The same frame again changes nothing: no row written (status_at kept), no hook.
    agentA.send({ type: 'allocations.status', id: 'st-2', ref: null, allocations: statuses });
    await new Promise((r) => setTimeout(r, 200));
    await panel.settled();
    const again = new Map((await rowsOf(a.id)).map((r) => [r.id, r]));
    for (const id of [run1, run2, stopped]) expect(again.get(id)!.status_at).toEqual(first.get(id)!.status_at);
    expect(hooked).toEqual([a.id]);

    // One allocation changes: only its row moves.
    agentA.send({ type: 'allocations.status', id: 'st-3', ref: null, allocations: [statuses[0]!, statusOf(run2, svc.serviceId, svc.releaseId, { since: '2026-12-04T20:01:00.000Z' })] });
    await waitFor(() => hooked.length === 2);
    const third = new Map((await rowsOf(a.id)).map((r) => [r.id, r]));
    expect(third.get(run1)!.status_at).toEqual(first.get(run1)!.status_at);
    expect(third.get(run2)!.status).toMatchObject({ state: 'running' });
    expect(third.get(run2)!.status_at!.getTime()).toBeGreaterThan(first.get(run2)!.status_at!.getTime());
  });

  it("a stale session's frame after a takeover writes nothing (generation fence), the new session's does", async () => {
    const [old] = await sql().rows<{ session_id: string; generation: string }>(`SELECT session_id, generation::text FROM node_owners WHERE node_id = $1`, [a.id]);
    expect(old!.session_id).toBe(agentA.welcome.sessionId);
    const takeover = await connect(a, CAPABLE);
    await takeover.waitFor((m) => m.type === 'allocations');
    await agentA.waitClosed();
    await panel.settled();
    const before = await rowsOf(a.id);
    // What the old session's frame would write, had it been in flight: its generation is no longer the node's.
    const writer = new PrismaFactWriter(panel.prisma, { maxWait: 2_000, timeout: 5_000 });
    const stale = { kind: 'allocations.status' as const, nodeId: a.id, sessionId: old!.session_id, at: new Date().toISOString(), generation: Number(old!.generation) };
    const [changed] = await writer.apply([{ ...stale, statuses: [{ allocationId: run1, serviceId: svc.serviceId, status: { state: 'failed', code: 'STALE' } }] }]);
    expect(changed).toBe(false);
    expect(await rowsOf(a.id)).toEqual(before);
    // The old socket is closed: whatever it sends is not read. The new session's frame is written under its own id.
    takeover.send({ type: 'allocations.status', id: 'st-4', ref: null, allocations: [statusOf(run1, svc.serviceId, svc.releaseId, { health: 'unhealthy' })] });
    await waitFor(async () => (await rowsOf(a.id)).find((r) => r.id === run1)!.status_session === takeover.welcome.sessionId);
    const run1Row = (await rowsOf(a.id)).find((r) => r.id === run1)!;
    expect(run1Row.status).toMatchObject({ health: 'unhealthy' });
    // run2 was left out of that complete frame but desired=run: its last status stays.
    const run2Row = (await rowsOf(a.id)).find((r) => r.id === run2)!;
    expect(run2Row.status).toMatchObject({ state: 'running' });
    // The new session repeats run2's status unchanged (as after a panel restart): the row now names the session that
    // proves it, and keeps when the status last changed.
    takeover.send({ type: 'allocations.status', id: 'st-5', ref: null, allocations: [{ ...(run2Row.status as AllocationStatus), allocationId: run2, serviceId: svc.serviceId }] });
    const repeated = await waitFor(async () => (await rowsOf(a.id)).find((r) => r.id === run2 && r.status_session === takeover.welcome.sessionId));
    expect(repeated.status).toEqual(run2Row.status);
    expect(repeated.status_at).toEqual(run2Row.status_at);
  });
});

describe('status per replica', () => {
  it('answers per allocation for a managed service: unknown on a node without a session, running counted on live nodes only', async () => {
    const m = await panel.createNode('replica-m');
    const n = await panel.createNode('replica-n');
    const svc = await serviceWithRelease(m.name, 'replica-web');
    await panel.prisma.service.update({ where: { id: svc.serviceId }, data: { replicas: 2 } });
    const onM = await allocation(svc.serviceId, m.id, svc.releaseId);
    const onN = await allocation(svc.serviceId, n.id, svc.releaseId);
    const stoppedOnM = await allocation(svc.serviceId, m.id, svc.releaseId, 'stop');
    const agentM = await connect(m, CAPABLE);
    await agentM.waitFor((x) => x.type === 'allocations');
    agentM.send({ type: 'allocations.status', id: 'rs-1', ref: null, allocations: [statusOf(onM, svc.serviceId, svc.releaseId)] });
    await waitFor(async () => (await rowsOf(m.id)).find((r) => r.id === onM)!.status_session === agentM.welcome.sessionId);
    // Its container as the home node's heartbeat shows it: until then the replica is not counted (the count never
    // runs ahead of the containers[] beside it).
    const early = (await panel.api('GET', `/v1/services/${svc.serviceId}/status`)).body;
    expect(early).toMatchObject({ runningReplicas: 0, containers: [] });
    const reported = statusOf(onM, svc.serviceId, svc.releaseId);
    agentM.heartbeat([
      { containerId: reported.containerId!, serviceId: svc.serviceId, deploymentId: svc.releaseId, name: 'replica-web-m', state: 'running', exitCode: null, health: 'healthy', restartCount: 0, since: reported.since, allocationId: onM },
    ]);
    await waitFor(async () => ((await panel.api('GET', `/v1/services/${svc.serviceId}/status`)).body.containers.length === 1 ? true : undefined));
    // A status recorded for the replica on N by a session long gone: N has no live session now.
    await sql().run(`UPDATE allocations SET status = $2::jsonb, status_at = now() - interval '1 hour', status_session = 'ses_gone' WHERE id = $1`, [
      onN,
      JSON.stringify({ state: 'running', health: 'healthy', runningDeploymentId: svc.releaseId }),
    ]);
    await panel.settled();

    const res = await panel.api('GET', `/v1/services/${svc.serviceId}/status`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ desiredReplicas: 2, runningReplicas: 1, unknownReplicas: 1, state: 'degraded' });
    const byId = new Map((res.body.allocations as { allocationId: string; evidence: { statusAgeMs: number } | null }[]).map((x) => [x.allocationId, x]));
    expect(byId.size).toBe(3);
    expect(byId.get(onM)).toMatchObject({
      node: { id: m.id, name: m.name },
      desired: 'run',
      state: 'running',
      health: 'healthy',
      deploymentId: svc.releaseId,
      runningDeploymentId: svc.releaseId,
      evidence: { sessionId: agentM.welcome.sessionId },
    });
    expect(byId.get(onN)).toMatchObject({ node: { name: n.name }, state: 'unknown', code: 'NODE_UNREACHABLE', evidence: { sessionId: 'ses_gone' } });
    expect(byId.get(onN)!.evidence!.statusAgeMs).toBeGreaterThan(3_500_000);
    expect(byId.get(stoppedOnM)).toMatchObject({ desired: 'stop', state: 'removed' });
    expect(res.body.reason).toContain(`${n.name}: unknown`);

    const list = await panel.api('GET', '/v1/status');
    const listed = (list.body.services as { serviceId: string; unknownReplicas: number; allocations: unknown[] }[]).find((s) => s.serviceId === svc.serviceId)!;
    expect(listed).toMatchObject({ runningReplicas: 1, unknownReplicas: 1 });
    expect(listed.allocations).toHaveLength(3);

    // The live node's session goes: its replica reads unknown too, and nothing is claimed: runningReplicas is
    // null (unknown, not zero), as for any unknown service.
    agentM.close();
    await waitFor(async () => (await panel.api('GET', `/v1/services/${svc.serviceId}/status`)).body.unknownReplicas === 2);
    const gone = await panel.api('GET', `/v1/services/${svc.serviceId}/status`);
    expect(gone.body).toMatchObject({ runningReplicas: null, unknownReplicas: 2, state: 'unknown' });
  });

  it('an unmanaged service answers as before, with no allocations', async () => {
    const u = await panel.createNode('replica-u');
    const agentU = await connect(u, [CAPABILITIES.SECRETS]);
    await agentU.waitFor((x) => x.type === 'workloads');
    const svc = await serviceWithRelease(u.name, 'replica-old');
    await allocation(svc.serviceId, u.id, svc.releaseId);
    await panel.settled();
    const res = await panel.api('GET', `/v1/services/${svc.serviceId}/status`);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ desiredReplicas: 1, runningReplicas: 0, unknownReplicas: 0, allocations: [], state: 'down' });
    expect(res.body.evidence).toMatchObject({ sessionId: agentU.welcome.sessionId });
  });
});

describe('the upgrade to allocations: the set is held until what the node runs is adopted', () => {
  it("held while the node row still reads the old panel's capabilities (the open's write not landed yet), then sent with the adoption", async () => {
    // A node whose last session agreed no workload.allocations (an old panel), running a released service.
    const n = await panel.createNode('adopt-race');
    await sql().run(`UPDATE nodes SET capabilities = $2 WHERE id = $1`, [n.id, [CAPABILITIES.SECRETS]]);
    const svc = await serviceWithRelease(n.name, 'adopt-kept');
    // The open's write of the agreed capabilities waits behind this lock (an update's: the claim's foreign key
    // check still passes, so the session opens), as it did once in a loaded CI run
    // (behind the outbox); the set's read goes ahead. Reading the node as unmanaged then, the panel sent an
    // empty set and the upgraded agent retired every container the adoption was about to take over.
    let release!: () => void;
    const held = panel.prisma.$transaction(
      async (tx) => {
        await tx.$executeRawUnsafe(`SELECT 1 FROM nodes WHERE id = $1 FOR NO KEY UPDATE`, n.id);
        await new Promise<void>((resolve) => (release = resolve));
      },
      { maxWait: 2_000, timeout: 15_000 },
    );
    await waitFor(() => release !== undefined, { timeoutMs: 2_000 });
    const agent = await connect(n, CAPABLE);
    // The set's read lingers at most OPEN_READ_LINGER_MS after the open; the routing map's write waits for the lock too.
    await new Promise((r) => setTimeout(r, 700));
    const [row] = await sql().rows<{ capabilities: string[] }>(`SELECT capabilities FROM nodes WHERE id = $1`, [n.id]);
    expect(row!.capabilities, 'the open write is still held').toEqual([CAPABILITIES.SECRETS]);
    expect(agent.received.filter((m) => m.type === 'allocations')).toEqual([]);
    release();
    await held;
    await panel.settled();
    expect(agent.received.filter((m) => m.type === 'allocations')).toEqual([]);

    // The adoption (the scheduler's write, here by hand) and its changed(): the set carries it.
    const adopted = await allocation(svc.serviceId, n.id, svc.releaseId);
    panel.app.agentSide.allocations.changed(n.id, 'test: adopted');
    const frame = await agent.waitFor<Allocations>((m) => m.type === 'allocations');
    expect(frame.allocations.map((x) => x.allocationId)).toEqual([adopted]);
  });
});

describe('a release that stops first (rollout.maxSurge 0)', () => {
  it('is left out for an agent without workload.stop-first (AGENT_LACKS_CAPABILITY naming it) and carries stopFirst to one with it', async () => {
    const ofNode = async (label: string, capabilities: string[]) => {
      const node = await panel.createNode(`stop-first-${label}`);
      const svc = await panel.api('POST', '/v1/services', { teamId, name: `stop-first-${label}`, image: 'busybox:1', node: node.name, rollout: { maxSurge: 0, maxUnavailable: 1 } });
      expect(svc.status).toBe(201);
      const spec = { name: `stop-first-${label}`, image: 'busybox:1', env: {}, internalPort: null, replicas: 1, rollout: { maxSurge: 0, maxUnavailable: 1 } };
      const release = await panel.prisma.deployment.create({ data: { serviceId: svc.body.id, nodeId: node.id, spec, status: 'running' } });
      const id = await allocation(svc.body.id, node.id, release.id);
      const agent = await connect(node, capabilities);
      return { node, id, release, frame: await agent.waitFor<Allocations>((m) => m.type === 'allocations') };
    };
    const old = await ofNode('old', CAPABLE);
    expect(old.frame.allocations).toEqual([]);
    expect(old.frame.releases).toEqual([]);
    expect(panel.app.agentSide.allocations.leftOut(old.node.id).get(old.id)).toMatchObject({
      reason: 'AGENT_LACKS_CAPABILITY',
      releaseId: old.release.id,
      missing: [CAPABILITIES.WORKLOAD_STOP_FIRST],
    });
    const capable = await ofNode('new', [...CAPABLE, CAPABILITIES.WORKLOAD_STOP_FIRST]);
    expect(capable.frame.allocations.map((a) => a.allocationId)).toEqual([capable.id]);
    expect(capable.frame.releases).toEqual([expect.objectContaining({ deploymentId: capable.release.id, stopFirst: true })]);
    expect(panel.app.agentSide.allocations.leftOut(capable.node.id).size).toBe(0);
  });
});
