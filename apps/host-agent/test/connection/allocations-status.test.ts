import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureDocker, waitFor } from '@tether/testkit';
import { CAPABILITIES, DEFAULT_TIMING, type Ack, type AllocationsStatus, type ErrorMessage, type Heartbeat, type Hello, type Release } from '@tether/protocol';
import type { PanelConnection } from '../../src/connection/panel-connection.js';
import type { DockerWorkloadController } from '../../src/runtime/docker-workload-controller.js';
import { LABELS } from '../../src/docker/docker-client.js';
import { useHarness } from '../runtime/support/harness.js';
import { FakePanel, testConnection, type PanelConn } from './fake-panel.js';

// allocations and allocations.status over a real WebSocket, a scripted panel and a real Docker engine: the
// session that agreed on workload.allocations routes the set (ACKed at once) and hears every change, a new
// session hears the state at once; a session that did not agree changes nothing (the frame is refused).

const docker = await ensureDocker();
const logger = pino({ level: 'silent' });

describe.skipIf(!docker.available)('allocations over the session', () => {
  const h = useHarness('alloc-ws');
  const panel = new FakePanel();
  let connection: PanelConnection | undefined;
  let controller: DockerWorkloadController;
  afterAll(async () => {
    await connection?.stop();
    await panel.stop();
  });

  const release = (deploymentId: string): Release => {
    const { replicas: _replicas, ...spec } = h.workload('api', deploymentId, { image: h.images.webHealthcheck, env: { MESSAGE: deploymentId } });
    return spec;
  };
  const connect = async (n: number, capabilities: string[]): Promise<PanelConn> => {
    const conn = await panel.waitForConnection(n);
    const hello = await conn.waitFor<Hello>((m) => m.type === 'hello');
    expect(hello.capabilities).toContain(CAPABILITIES.WORKLOAD_ALLOCATIONS);
    conn.send({ type: 'welcome', id: `w${n}`, ref: hello.id, sessionId: `ses_${n}`, nodeId: 'node_1', timing: DEFAULT_TIMING, capabilities });
    return conn;
  };
  const allRunning = (ref: string | null) => (m: { type: string }) =>
    m.type === 'allocations.status' && (m as AllocationsStatus).ref === ref && (m as AllocationsStatus).allocations.length === 2 && (m as AllocationsStatus).allocations.every((s) => s.state === 'running');

  it('a panel that confirmed workload.allocations gets the ACK, a status per change, and the state at once on its next session', async () => {
    controller = h.controller({ logger });
    await controller.start();
    panel.autoWelcome = null;
    connection = testConnection(await panel.start(), { workloads: controller, nodeName: h.node, reconnect: { minMs: 50, maxMs: 100, healthySessionMs: 300, connectTimeoutMs: 1_000 }, overrides: { heartbeatIntervalMs: 200 }, logger });
    connection.start();
    const first = await connect(1, [CAPABILITIES.WORKLOAD_ALLOCATIONS]);
    await first.waitFor((m) => m.type === 'heartbeat');
    // A fresh agent has no set yet: no status (an empty list would say every allocation is gone).
    expect(first.received.some((m) => m.type === 'allocations.status')).toBe(false);

    const sentAt = Date.now();
    first.send({ type: 'allocations', id: 'pal_1', releases: [release('api-d1')], allocations: [{ allocationId: 'alc-1', serviceId: 'api', deploymentId: 'api-d1' }, { allocationId: 'alc-2', serviceId: 'api', deploymentId: 'api-d1' }] });
    const ack = await first.waitFor<Ack>((m) => m.type === 'ack' && (m as Ack).ref === 'pal_1');
    const ackMs = Date.now() - sentAt;
    const running = await first.waitFor<AllocationsStatus>(allRunning('pal_1'), 15_000);
    const runningMs = Date.now() - sentAt;
    const statuses = first.received.filter((m): m is AllocationsStatus => m.type === 'allocations.status');
    // The set's receipt is reported at once (pending), then every change until both run.
    expect(statuses[0]).toMatchObject({ ref: 'pal_1', allocations: [expect.objectContaining({ allocationId: 'alc-1', state: 'pending', containerId: null }), expect.objectContaining({ allocationId: 'alc-2', state: 'pending' })] });
    expect(statuses.length).toBeGreaterThanOrEqual(2);
    expect(ack).toBeDefined();
    console.log(`allocations over the session: ACK after ${ackMs} ms, both running after ${runningMs} ms in ${statuses.length} status frames`);
    expect(ackMs).toBeLessThan(1_000);
    expect(runningMs).toBeGreaterThanOrEqual(200);
    expect(runningMs).toBeLessThan(15_000);

    // The heartbeat's containers carry the allocation the status names.
    const containers = await h.containers();
    const heartbeat = await first.waitFor<Heartbeat>((m) => m.type === 'heartbeat' && (m as Heartbeat).containers.length === 2);
    for (const s of running.allocations) {
      expect(s).toMatchObject({ deploymentId: 'api-d1', runningDeploymentId: 'api-d1', code: null, reason: null, imageRef: expect.stringMatching(/^sha256:/) });
      expect(containers.find((c) => c.id === s.containerId)?.labels[LABELS.allocation]).toBe(s.allocationId);
      expect(heartbeat.containers.find((c) => c.containerId === s.containerId)?.allocationId).toBe(s.allocationId);
    }
    // For such a session the set is the one intent path: workloads is refused and changes nothing.
    first.send({ type: 'workloads', id: 'pwl_1', workloads: [] });
    const refused = await first.waitFor<ErrorMessage>((m) => m.type === 'error' && (m as ErrorMessage).ref === 'pwl_1');
    expect(refused.code).toBe('UNEXPECTED_MESSAGE');

    // The session drops; the next one hears the state right after its welcome (ref null: no set on it yet).
    first.socket.terminate();
    const second = await connect(2, [CAPABILITIES.WORKLOAD_ALLOCATIONS]);
    const welcomedAt = Date.now();
    const again = await second.waitFor<AllocationsStatus>(allRunning(null), 2_000);
    const againMs = Date.now() - welcomedAt;
    console.log(`allocations over the session: state on a new session ${againMs} ms after welcome`);
    expect(againMs).toBeLessThan(1_000);
    expect(again.allocations.map((s) => s.containerId).sort()).toEqual(running.allocations.map((s) => s.containerId).sort());
    expect(again.allocations.map((s) => s.since)).toEqual(running.allocations.map((s) => s.since));
    expect((await h.containers()).map((c) => c.id).sort()).toEqual(containers.map((c) => c.id).sort());
  });

  it('a panel that did not confirm it changes nothing: the set is refused, no status, no allocationId, workloads works as before', async () => {
    const before = (await h.containers()).map((c) => c.id).sort();
    panel.connections.at(-1)!.socket.terminate();
    const n = panel.connections.length + 1;
    const conn = await connect(n, []);
    conn.send({ type: 'allocations', id: 'pal_2', releases: [release('api-d2')], allocations: [{ allocationId: 'alc-1', serviceId: 'api', deploymentId: 'api-d2' }] });
    const refused = await conn.waitFor<ErrorMessage>((m) => m.type === 'error' && (m as ErrorMessage).ref === 'pal_2');
    expect(refused.code).toBe('UNEXPECTED_MESSAGE');
    const heartbeat = await conn.waitFor<Heartbeat>((m) => m.type === 'heartbeat' && (m as Heartbeat).containers.length === 2);
    expect(heartbeat.containers.every((c) => c.allocationId === undefined)).toBe(true);
    expect(conn.received.some((m) => m.type === 'allocations.status' || (m.type === 'ack' && m.ref === 'pal_2'))).toBe(false);
    expect((await h.containers()).map((c) => c.id).sort()).toEqual(before);
    // workloads as today: ACKed, and the node follows it (nothing desired: the service's containers go).
    conn.send({ type: 'workloads', id: 'pwl_2', workloads: [] });
    await conn.waitFor((m) => m.type === 'ack' && m.ref === 'pwl_2');
    await waitFor(async () => (await h.containers()).length === 0, { timeoutMs: 8_000, message: 'containers removed by the workloads set' });
    expect(conn.received.some((m) => m.type === 'allocations.status')).toBe(false);
  });
});
