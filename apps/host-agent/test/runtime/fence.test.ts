import { ensureDocker, sleep, waitFor } from '@tether/testkit';
import { silentLogger } from '@tether/common';
import { afterAll, describe, expect, it } from 'vitest';
import { CAPABILITIES, DEFAULT_TIMING, type Allocations, type Hello, type Release } from '@tether/protocol';
import { LABELS } from '../../src/docker/docker-client.js';
import type { PanelConnection } from '../../src/connection/panel-connection.js';
import { FakePanel, testConnection, type PanelConn } from '../connection/fake-panel.js';
import { useHarness } from './support/harness.js';
import { agentCapabilities } from '../../src/connection/handshake.js';
import { DisabledRouting, UnavailableWorkloads } from '../../src/null-controllers.js';

// Self-fencing (capability workload.fence) with the agent's real session and a real Docker engine: a panel
// stand-in (a real WebSocket server) sends welcome and an allocations set with a fenced and a plain service, then
// goes silent holding the socket open (no FIN). The fenced container stops no earlier than TETHER_FENCE_AFTER_MS
// after the last frame and not long after; the plain one keeps running. When the stand-in speaks again on that old
// session the agent drops it, and the fenced one starts again only from the fresh session's set.

const docker = await ensureDocker();
const FENCE_AFTER_MS = 600;
const STOP_TIMEOUT_MS = 1_000;
/** Sampling, the event loop and Docker's own stop and remove calls. */
const SLACK_MS = 1_000;

describe('workload.fence in hello', () => {
  it('announced only with a fence deadline and workloads that run allocations and can fence', () => {
    const fencing = Object.assign(new UnavailableWorkloads(), { capabilities: [CAPABILITIES.WORKLOAD_ALLOCATIONS], setFenced: () => undefined });
    const routing = new DisabledRouting();
    expect(agentCapabilities({ routing, workloads: fencing, fence: { afterMs: 600 } })).toContain(CAPABILITIES.WORKLOAD_FENCE);
    expect(agentCapabilities({ routing, workloads: fencing })).not.toContain(CAPABILITIES.WORKLOAD_FENCE);
    expect(agentCapabilities({ routing, workloads: new UnavailableWorkloads(), fence: { afterMs: 600 } })).not.toContain(CAPABILITIES.WORKLOAD_FENCE);
    const noAllocations = Object.assign(new UnavailableWorkloads(), { setFenced: () => undefined });
    expect(agentCapabilities({ routing, workloads: noAllocations, fence: { afterMs: 600 } })).not.toContain(CAPABILITIES.WORKLOAD_FENCE);
  });
});

describe.skipIf(!docker.available)('agent: self-fencing with a real engine', () => {
  const h = useHarness('fence');
  const panel = new FakePanel();
  let connection: PanelConnection | undefined;
  afterAll(async () => {
    await connection?.stop();
    await panel.stop();
  });

  const release = (serviceId: string, deploymentId: string, fence: boolean): Release => {
    const { replicas: _replicas, ...spec } = h.workload(serviceId, deploymentId, { image: h.images.web });
    return fence ? { ...spec, fence: true } : spec;
  };
  const set = (id: string): Omit<Allocations, 'id'> & { id: string } => ({
    type: 'allocations',
    id,
    releases: [release('lock', 'lock-d1', true), release('web', 'web-d1', false)],
    allocations: [
      { allocationId: 'alc-lock', serviceId: 'lock', deploymentId: 'lock-d1' },
      { allocationId: 'alc-web', serviceId: 'web', deploymentId: 'web-d1' },
    ],
  });
  /** The running container of a service, straight from Docker. */
  const running = async (serviceId: string) => (await h.containers()).find((c) => c.labels[LABELS.service] === serviceId && c.state === 'running');
  const open = async (n: number): Promise<{ conn: PanelConn; hello: Hello }> => {
    const conn = await panel.waitForConnection(n, 10_000);
    const hello = await conn.waitFor<Hello>((m) => m.type === 'hello');
    conn.send({ type: 'welcome', id: `w${n}`, ref: hello.id, sessionId: `ses_${n}`, nodeId: 'node_1', timing: DEFAULT_TIMING, capabilities: [CAPABILITIES.WORKLOAD_ALLOCATIONS, CAPABILITIES.WORKLOAD_FENCE] });
    return { conn, hello };
  };

  it('stops the fenced container after the fence deadline of silence, keeps the plain one, and starts it again from a fresh session only', async () => {
    panel.autoWelcome = null;
    const controller = h.controller({ logger: silentLogger, timing: { stopTimeoutMs: STOP_TIMEOUT_MS } });
    await controller.start();
    connection = testConnection(await panel.start(), {
      workloads: controller,
      fence: { afterMs: FENCE_AFTER_MS, stopTimeoutMs: STOP_TIMEOUT_MS },
      overrides: { agentIdleTimeoutMs: 60_000 },
      reconnect: { minMs: 20, maxMs: 50, healthySessionMs: 300, connectTimeoutMs: 2_000 },
    });
    connection.start();

    const first = await open(1);
    expect(first.hello.capabilities).toContain(CAPABILITIES.WORKLOAD_FENCE);
    expect(first.hello.fence).toEqual({ afterMs: FENCE_AFTER_MS, stopTimeoutMs: STOP_TIMEOUT_MS });
    // Frames keep the fence away while the containers start (slower than the fence deadline).
    let lastSentAt = Date.now();
    const keepTalking = setInterval(() => {
      first.conn.send({ type: 'ping', id: `p${Date.now()}` });
      lastSentAt = Date.now();
    }, FENCE_AFTER_MS / 4);
    first.conn.send(set('set-1'));
    await waitFor(async () => (await running('lock')) !== undefined && (await running('web')) !== undefined, { timeoutMs: 30_000, intervalMs: 50, message: 'both containers running' });
    const web = (await running('web'))!;
    const lock = (await running('lock'))!;
    expect(lock.labels[LABELS.fence]).toBe('true');
    expect(web.labels[LABELS.fence]).toBeUndefined();

    // Silence, the socket held open: the stand-in's last frame is the last ping.
    clearInterval(keepTalking);
    const silentFrom = lastSentAt;
    let stoppedAt = 0;
    while (Date.now() - silentFrom < FENCE_AFTER_MS + STOP_TIMEOUT_MS + SLACK_MS * 3) {
      const now = Date.now();
      const c = (await h.containers()).find((x) => x.id === lock.id);
      if (!c || c.state !== 'running') {
        stoppedAt = now;
        break;
      }
      await sleep(25);
    }
    const tookMs = stoppedAt - silentFrom;
    expect(stoppedAt, 'the fenced container stopped').toBeGreaterThan(0);
    expect(tookMs).toBeGreaterThanOrEqual(FENCE_AFTER_MS);
    expect(tookMs).toBeLessThanOrEqual(FENCE_AFTER_MS + STOP_TIMEOUT_MS + SLACK_MS);
    console.log(`fenced container stopped ${tookMs} ms after the stand-in went silent (fence after ${FENCE_AFTER_MS} ms)`);
    expect(first.conn.closedAt, 'the agent kept the silent session (its idle deadline is longer)').toBeNull();

    // The plain container runs on, the same one, and the fenced one stays down while nothing is heard.
    await sleep(FENCE_AFTER_MS);
    expect((await running('web'))?.id).toBe(web.id);
    expect(await running('lock')).toBeUndefined();

    // The stand-in speaks again on the old session: the agent drops it and asks a fresh one.
    first.conn.send({ type: 'ping', id: 'p-late' });
    await waitFor(() => first.conn.closedAt !== null, { timeoutMs: 2_000, intervalMs: 10, message: 'old session dropped' });
    const second = await open(2);
    const keepTalking2 = setInterval(() => second.conn.send({ type: 'ping', id: `q${Date.now()}` }), FENCE_AFTER_MS / 4);
    try {
      // A welcome is no intent: nothing fenced starts before the fresh session's set.
      await sleep(FENCE_AFTER_MS / 2);
      expect(await running('lock')).toBeUndefined();
      const setAt = Date.now();
      second.conn.send(set('set-2'));
      await waitFor(async () => (await running('lock')) !== undefined, { timeoutMs: 20_000, intervalMs: 50, message: 'fenced container started again' });
      console.log(`fenced container running again ${Date.now() - setAt} ms after the fresh set`);
      expect((await running('web'))?.id).toBe(web.id);
      const lockAgain = (await h.containers()).filter((c) => c.labels[LABELS.service] === 'lock');
      expect(lockAgain).toHaveLength(1);
    } finally {
      clearInterval(keepTalking2);
    }
  }, 60_000);
});
