import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ensureDocker, sleep, waitFor } from '@tether/testkit';
import { afterAll, describe, expect, it } from 'vitest';
import { CLOSE_CODES, DECOMMISSIONED_REFUSAL_CODE, type Release } from '@tether/protocol';
import { pino } from 'pino';
import type { ProxyTraffic, WorkloadController } from '../../src/controllers.js';
import { DECOMMISSIONED_FILE, DecommissionGuard } from '../../src/decommission-guard.js';
import type { DockerWorkloadController } from '../../src/runtime/docker-workload-controller.js';
import { FakePanel, testConnection } from '../connection/fake-panel.js';
import { useHarness } from './support/harness.js';

// A decommissioned or lost node runs nothing (issue 38), on a real engine and a real socket: a panel stand-in
// closes the session with 4005, then refuses the upgrade with 403 AGENT_DECOMMISSIONED. The agent takes its
// containers out of the proxy's answers, then stops them; restarted with its state dir it starts none of them,
// before any panel is reached; only a welcome (a node registered anew) and the set that follows run them again.

const docker = await ensureDocker();
const RECONNECT = { minMs: 50, maxMs: 300, healthySessionMs: 1_000, connectTimeoutMs: 1_000 };

describe.skipIf(!docker.available)('decommissioned: the agent stops what it runs and never starts it again', () => {
  const h = useHarness('decom');
  let stateDir = '';
  const panel = new FakePanel();
  afterAll(async () => {
    await panel.stop();
    await rm(stateDir, { recursive: true, force: true });
  });

  const release = (deploymentId: string): Release => {
    const { replicas: _replicas, ...spec } = h.workload('db', deploymentId, { env: { MESSAGE: 'v1' } });
    return spec;
  };
  const state = async (id: string) => (await h.docker.getContainer(id).inspect()).State;

  /** An agent as main.ts composes it (guard before the controller starts), on this harness's node and state dir. */
  async function agent(url: string, traffic?: ProxyTraffic) {
    const controller = h.controller({ allocationsFile: path.join(stateDir, 'allocations.json'), ...(traffic ? { traffic: () => traffic } : {}) });
    const logs: { level: number; msg: string }[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void logs.push(JSON.parse(line) as { level: number; msg: string }) });
    const connection = testConnection(url, { reconnect: RECONNECT, workloads: controller as WorkloadController, logger });
    const guard = new DecommissionGuard(stateDir, controller, logger);
    await guard.start(connection);
    await controller.start();
    connection.start();
    return { controller, connection, logs };
  }

  it('close 4005: out of the answers, then stopped; restarted: nothing starts; 403 AGENT_DECOMMISSIONED: still nothing; welcomed again: its set runs', async () => {
    stateDir = await mkdtemp(path.join(os.tmpdir(), 'tether-decom-'));
    const url = await panel.start();
    // The answers switch is recorded with the container's state at that moment: it must still be running then.
    const switches: { at: number; running: boolean }[] = [];
    let watched = '';
    const traffic: ProxyTraffic = {
      switchAnswers: async () => void switches.push({ at: Date.now(), running: watched !== '' && (await state(watched)).Running }),
      openConnections: async () => 0,
    };
    const first = await agent(url, traffic);
    await waitFor(() => first.connection.state === 'ready', { timeoutMs: 5_000 });
    (first.controller as DockerWorkloadController).setAllocations({ id: 'set-1', allocations: [{ allocationId: 'al-1', serviceId: 'db', deploymentId: 'd1' }], releases: [release('d1')] });
    // Rolled out (its rollout over: a halt mid-rollout removes the new container, as a failed rollout does).
    await waitFor(() => first.controller.allocationStatus()?.find((a) => a.allocationId === 'al-1' && a.state === 'running'), { timeoutMs: 20_000, message: 'al-1 running' });
    const running = (await h.containers()).find((c) => c.state === 'running')!;
    watched = running.id;
    expect(first.controller.notServing().has(running.id)).toBe(false);

    const closedAt = Date.now();
    panel.refuseWith = 403;
    panel.refuseBody = { error: { code: DECOMMISSIONED_REFUSAL_CODE, message: 'node decommissioned' } };
    const closed = new Promise<{ retryInMs: number }>((resolve) => first.connection.once('closed', resolve));
    panel.connections.at(-1)!.socket.close(CLOSE_CODES.DECOMMISSIONED, 'node decommissioned by an operator');
    // The refusal is terminal: the next dial waits the backoff cap.
    expect((await closed).retryInMs).toBe(RECONNECT.maxMs);
    await waitFor(async () => !(await state(running.id)).Running, { timeoutMs: 10_000, message: 'db stopped' });
    const stoppedMs = Date.now() - closedAt;
    console.log(`decommission: container stopped ${stoppedMs} ms after close 4005`);
    // Stopped gracefully within the stop timeout (2 s here) plus the pass, never left running.
    expect(stoppedMs).toBeLessThan(5_000);
    expect(switches.length).toBeGreaterThanOrEqual(1);
    expect(switches[0]).toMatchObject({ running: true });
    expect(first.controller.notServing().has(running.id)).toBe(true);
    expect(JSON.parse(await readFile(path.join(stateDir, DECOMMISSIONED_FILE), 'utf8'))).toMatchObject({ how: expect.stringContaining('4005') });
    const errors = first.logs.filter((l) => l.level >= 50);
    expect(errors).toHaveLength(1);
    expect(errors[0]!.msg).toContain('decommissioned');
    // Still dialling at the cap, each refusal recognised, nothing started meanwhile.
    const retries: number[] = [];
    first.connection.on('closed', (e) => retries.push(e.retryInMs));
    await sleep(1_000);
    expect(retries.length).toBeGreaterThanOrEqual(2);
    expect(new Set(retries)).toEqual(new Set([RECONNECT.maxMs]));
    expect((await state(running.id)).Running).toBe(false);
    expect(first.logs.filter((l) => l.level >= 50)).toHaveLength(1);
    await first.connection.stop();
    await first.controller.stop();

    // Restarted on the same state dir, the panel still refusing: the restored allocation starts nothing (sampled).
    const second = await agent(url);
    expect(second.logs.filter((l) => l.level >= 50).map((l) => l.msg)).toEqual([expect.stringContaining('decommissioned')]);
    const until = Date.now() + 3_000;
    while (Date.now() < until) {
      expect((await h.containers()).filter((c) => c.state === 'running')).toEqual([]);
      await sleep(100);
    }
    expect((await h.containers()).map((c) => c.id)).toEqual([running.id]);

    // Registered anew: a welcome clears the marker, and the set that follows runs again.
    panel.refuseWith = null;
    await waitFor(() => second.connection.state === 'ready', { timeoutMs: 5_000 });
    await waitFor(async () => (await stat(path.join(stateDir, DECOMMISSIONED_FILE)).catch(() => null)) === null, { timeoutMs: 2_000, message: 'marker cleared' });
    second.controller.setAllocations({ id: 'set-2', allocations: [{ allocationId: 'al-1', serviceId: 'db', deploymentId: 'd1' }], releases: [release('d1')] });
    await waitFor(async () => (await h.containers()).find((c) => c.state === 'running'), { timeoutMs: 20_000, message: 'db running again' });
    await second.connection.stop();
  }, 90_000);
});
