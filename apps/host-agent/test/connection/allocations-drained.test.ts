import net from 'node:net';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureDocker, sleep, waitFor } from '@tether/testkit';
import { CAPABILITIES, DEFAULT_TIMING, type AllocationsDrained, type AllocationsStatus, type Hello, type Release } from '@tether/protocol';
import type { PanelConnection } from '../../src/connection/panel-connection.js';
import type { ProxyTraffic } from '../../src/controllers.js';
import { LABELS } from '../../src/docker/docker-client.js';
import { TEST_TIMING, useHarness } from '../runtime/support/harness.js';
import { FakePanel, testConnection, type PanelConn } from './fake-panel.js';

// allocations.drained (capability allocations.drain) over a real WebSocket, a scripted panel and a real Docker
// engine. The proxy's side counts real TCP connections the test holds open on a container's address (each one
// counts until its socket closes), so "one connection open" is a socket the drain really cuts. A first rollout
// (nothing replaced) reports 0/0 at once; a release change with one connection held past drainSeconds reports
// 1 open at the switch and 1 cut, its end drainSeconds after the switch, held across a reconnect; a removed
// allocation's drain is never reported; a session that did not agree on the capability gets no report.

const docker = await ensureDocker();
const logger = pino({ level: 'silent' });
const DRAIN_SECONDS = 2;

describe.skipIf(!docker.available)('allocations.drained over the session', () => {
  const h = useHarness('alloc-drained');
  const panel = new FakePanel();
  let connection: PanelConnection | undefined;
  /** Sockets the test holds open, by the container they reach. */
  const held: { containerId: string; socket: net.Socket; closed: boolean }[] = [];
  const switches: number[] = [];
  const traffic: ProxyTraffic = {
    switchAnswers: () => {
      switches.push(Date.now());
      return Promise.resolve();
    },
    openConnections: (ids) => Promise.resolve(held.filter((c) => !c.closed && ids.includes(c.containerId)).length),
  };
  afterAll(async () => {
    for (const c of held) c.socket.destroy();
    await connection?.stop();
    await panel.stop();
  });

  const release = (deploymentId: string): Release => {
    const { replicas: _replicas, ...spec } = h.workload('drn', deploymentId, { env: { MESSAGE: deploymentId }, drainSeconds: DRAIN_SECONDS });
    return spec;
  };
  const all = ['alc-1', 'alc-2'];
  const setOf = (id: string, deploymentId: string, allocationIds = all) => ({
    type: 'allocations' as const,
    id,
    releases: [release(deploymentId)],
    allocations: allocationIds.map((allocationId) => ({ allocationId, serviceId: 'drn', deploymentId })),
  });
  const connect = async (n: number, capabilities: string[]): Promise<PanelConn> => {
    const conn = await panel.waitForConnection(n);
    const hello = await conn.waitFor<Hello>((m) => m.type === 'hello');
    expect(hello.capabilities).toEqual(expect.arrayContaining([CAPABILITIES.WORKLOAD_ALLOCATIONS, CAPABILITIES.WORKLOAD_DRAIN, CAPABILITIES.ALLOCATIONS_DRAIN]));
    conn.send({ type: 'welcome', id: `w${n}`, ref: hello.id, sessionId: `ses_${n}`, nodeId: 'node_1', timing: DEFAULT_TIMING, capabilities });
    await conn.waitFor((m) => m.type === 'heartbeat');
    return conn;
  };
  const runningOn = (deploymentId: string, count = 2) => (m: { type: string }) =>
    m.type === 'allocations.status' &&
    (m as AllocationsStatus).allocations.filter((s) => s.state === 'running' && s.runningDeploymentId === deploymentId).length === count;
  const drainedOf = (deploymentId: string) => (m: { type: string }) => m.type === 'allocations.drained' && (m as AllocationsDrained).deploymentId === deploymentId;
  /** Holds a real connection on the container's address: a request that never ends (busybox httpd waits for its headers). */
  const hold = async (containerId: string) => {
    const info = await h.docker.getContainer(containerId).inspect();
    const ip = info.NetworkSettings.Networks[h.network]!.IPAddress;
    const socket = net.connect(8080, ip);
    await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
    socket.write('GET / HTTP/1.1\r\nHost: drn\r\n');
    const entry = { containerId, socket, closed: false };
    socket.on('close', () => (entry.closed = true)).on('error', () => undefined);
    held.push(entry);
    return entry;
  };

  it('reports each rollout\'s drain with its allocations and counts, across a reconnect; never a removed allocation\'s', async () => {
    const controller = h.controller({ logger, traffic: () => traffic });
    await controller.start();
    panel.autoWelcome = null;
    connection = testConnection(await panel.start(), { workloads: controller, nodeName: h.node, reconnect: { minMs: 50, maxMs: 100, healthySessionMs: 300, connectTimeoutMs: 1_000 }, overrides: { heartbeatIntervalMs: 200 }, logger });
    // As agent.ts wires it: what the workloads report on their own goes through the session.
    controller.onReport((r) => (r.kind === 'drained' ? connection!.reportDrained(r.drain) : undefined));
    connection.start();
    const agreed = [CAPABILITIES.WORKLOAD_ALLOCATIONS, CAPABILITIES.WORKLOAD_DRAIN, CAPABILITIES.ALLOCATIONS_DRAIN];
    const first = await connect(1, agreed);

    // The first release replaces nothing: 0 and 0 once both allocations run it.
    first.send(setOf('pal_1', 'drn-d1'));
    await first.waitFor(runningOn('drn-d1'), 15_000);
    const runningAt = Date.now();
    const initial = await first.waitFor<AllocationsDrained>(drainedOf('drn-d1'), 2_000);
    const initialMs = Date.now() - runningAt;
    expect({ ...initial, allocationIds: [...initial.allocationIds].sort() }).toMatchObject({ allocationIds: all, connectionsOpenAtSwitch: 0, connectionsCut: 0 });
    expect(initialMs).toBeLessThan(1_000);

    // One real connection held on alc-1's container, past drainSeconds.
    const containers = await h.containers();
    const old1 = containers.find((c) => c.labels[LABELS.allocation] === 'alc-1')!;
    const socket = await hold(old1.id);
    expect(await traffic.openConnections([old1.id])).toBe(1);
    const switchesBefore = switches.length;
    const sentAt = Date.now();
    first.send(setOf('pal_2', 'drn-d2'));
    await first.waitFor(runningOn('drn-d2'), 15_000);
    const switchAt = switches[switchesBefore]!;
    expect(switchAt).toBeGreaterThanOrEqual(sentAt);
    // The session drops mid-drain: the report waits for the next one.
    first.socket.terminate();
    const second = await connect(2, agreed);
    const report = await second.waitFor<AllocationsDrained>(drainedOf('drn-d2'), DRAIN_SECONDS * 1_000 + TEST_TIMING.stopTimeoutMs + 5_000);
    const endedMs = Date.parse(report.drainEndedAt) - switchAt;
    console.log(`allocations.drained: one held connection, drain ended ${endedMs} ms after the switch (drainSeconds ${DRAIN_SECONDS}, stop grace ${TEST_TIMING.stopTimeoutMs} ms), received on the next session`);
    expect({ ...report, allocationIds: [...report.allocationIds].sort() }).toMatchObject({ allocationIds: all, connectionsOpenAtSwitch: 1, connectionsCut: 1 });
    expect(endedMs).toBeGreaterThanOrEqual(DRAIN_SECONDS * 1_000);
    expect(endedMs).toBeLessThan(DRAIN_SECONDS * 1_000 + TEST_TIMING.stopTimeoutMs + 1_500);
    await waitFor(() => socket.closed, { timeoutMs: 2_000, message: 'the held connection was cut' });
    expect(first.received.filter((m) => m.type === 'allocations.drained').length).toBe(1);
    expect(second.received.filter(drainedOf('drn-d2')).length).toBe(1);

    // alc-2 removed (its container drains and stops): no report, it is no deployment's drain.
    const old2 = (await h.containers()).find((c) => c.labels[LABELS.allocation] === 'alc-2')!;
    second.send(setOf('pal_3', 'drn-d2', ['alc-1']));
    await waitFor(async () => !(await h.containers()).some((c) => c.id === old2.id), { timeoutMs: DRAIN_SECONDS * 1_000 + TEST_TIMING.stopTimeoutMs + 3_000, intervalMs: 50, message: 'alc-2 removed' });
    await sleep(500);
    expect(second.received.filter((m) => m.type === 'allocations.drained').length).toBe(1);

    // A session that did not agree on allocations.drain gets no report; it is held for the next session that did.
    second.socket.terminate();
    const third = await connect(3, [CAPABILITIES.WORKLOAD_ALLOCATIONS, CAPABILITIES.WORKLOAD_DRAIN]);
    third.send(setOf('pal_4', 'drn-d3', ['alc-1']));
    await third.waitFor(runningOn('drn-d3', 1), 15_000);
    await sleep(1_000);
    expect(third.received.some((m) => m.type === 'allocations.drained')).toBe(false);
    third.socket.terminate();
    const fourth = await connect(4, agreed);
    expect(await fourth.waitFor<AllocationsDrained>(drainedOf('drn-d3'), 1_000)).toMatchObject({ allocationIds: ['alc-1'], connectionsOpenAtSwitch: 0, connectionsCut: 0 });
  });
});
