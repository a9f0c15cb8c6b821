import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ensureDocker, sleep, waitFor } from '@tether/testkit';
import { byNode, startFleet, type Fleet } from './helpers/node-fleet.js';
import type { AgentProcess } from './helpers/agent-process.js';
import type { Panel } from './helpers/panel-harness.js';

// Issue 38 end to end: three real agents, a service with 2 replicas on n1 and n2, n3 idle. n1's agent is frozen
// (SIGSTOP: its socket stays open, no FIN, no RST), so the panel tears its session down at its read-idle deadline;
// n1's replica must then run on n3 no earlier than the teardown + TETHER_RESCHEDULE_AFTER_MS and no later than that
// + the scheduler interval + the container's start. n1's agent thawed: its old copy is stopped (the replacement
// wins). What runs is read from Docker itself.

const RESCHEDULE_AFTER_MS = 3_000;
/** The scheduler interval, the container's start and its health check, with room for a loaded machine. */
const START_BOUND_MS = 10_000;

const docker = await ensureDocker();

describe.skipIf(!docker.available)('failover: a frozen agent\'s replica runs elsewhere after the grace', () => {
  let fleet: Fleet;
  let panel: Panel;
  let image: string;
  let teamId: string;
  let agents: AgentProcess[];
  let nodes: Fleet['nodes'];
  const tag = `fo-${process.pid}`;

  beforeAll(async () => {
    fleet = await startFleet({ tag, nodes: 3, panelEnv: { TETHER_RESCHEDULE_AFTER_MS: String(RESCHEDULE_AFTER_MS) } });
    ({ panel, image, teamId, agents, nodes } = fleet);
  }, 60_000);
  afterEach((context) => fleet.explain(context));
  afterAll(async () => {
    await fleet?.close();
  });

  it('n1 frozen: its replica runs on n3 within [teardown + grace, + bound]; thawed, its old copy is removed and 2 copies remain', async () => {
    const res = await panel.api('POST', '/v1/services', { teamId, name: 'fo', image, env: { MESSAGE: 'v1' }, internalPort: 8080, replicas: 2, healthCheck: { path: '/index.html' } });
    expect(res.status).toBe(201);
    const serviceId = res.body.id as string;
    const deploy = await panel.api('POST', `/v1/services/${serviceId}/deployments`, {});
    expect(deploy.status).toBe(201);
    expect(await fleet.settled(deploy.body.id, 30_000)).toMatchObject({ status: 'running' });
    const before = await fleet.running(serviceId);
    expect(byNode(before)).toEqual([nodes[0]!.name, nodes[1]!.name]);
    const onN2 = before.find((c) => c.Labels['tether.node'] === nodes[1]!.name)!;

    const frozen = agents[0]!;
    const stoppedAt = performance.now();
    process.kill(frozen.process.pid, 'SIGSTOP');
    await waitFor(() => (panel.app.agentSide.registry.get(nodes[0]!.id) ? undefined : true), { timeoutMs: 15_000, intervalMs: 20, message: 'n1 torn down' });
    const teardown = performance.now();
    // Before the grace ends nothing runs on n3 (sampled every 100 ms up to 300 ms before it).
    while (performance.now() < teardown + RESCHEDULE_AFTER_MS - 300) {
      expect(byNode(await fleet.containers(serviceId)).includes(nodes[2]!.name)).toBe(false);
      await sleep(100);
    }
    const replacement = await waitFor(
      async () => (await fleet.running(serviceId)).find((c) => c.Labels['tether.node'] === nodes[2]!.name && c.State === 'running'),
      { timeoutMs: RESCHEDULE_AFTER_MS + START_BOUND_MS + 5_000, intervalMs: 50, message: 'the replica running on n3' },
    );
    const runningAt = performance.now();
    await waitFor(async () => ((await fleet.answer(replacement)) === 'v1' ? true : undefined), { timeoutMs: 10_000, intervalMs: 100, message: 'n3 answering' });
    const answeringAt = performance.now();
    // The database's own clock: the replacement allocation was made no earlier than the recorded teardown + grace.
    const [made] = await panel.prisma.$queryRawUnsafe<{ after_ms: number }[]>(
      `SELECT (extract(epoch FROM a.created_at) - extract(epoch FROM n.last_teardown_at)) * 1000 AS after_ms
       FROM allocations a JOIN nodes n ON n.id = $2 WHERE a.service_id = $1 AND a.cause = 'node-lost'`,
      serviceId,
      nodes[0]!.id,
    );
    console.log(
      `failover: teardown ${Math.round(teardown - stoppedAt)} ms after SIGSTOP; replacement allocation ${Math.round(Number(made!.after_ms))} ms after the recorded teardown; ` +
        `container running on n3 ${Math.round(runningAt - teardown)} ms after teardown, answering ${Math.round(answeringAt - teardown)} ms`,
    );
    expect(Number(made!.after_ms)).toBeGreaterThanOrEqual(RESCHEDULE_AFTER_MS);
    expect(runningAt - teardown).toBeGreaterThanOrEqual(RESCHEDULE_AFTER_MS - 100);
    expect(runningAt - teardown).toBeLessThanOrEqual(RESCHEDULE_AFTER_MS + START_BOUND_MS);
    // n2's replica never restarted.
    expect((await fleet.running(serviceId)).map((c) => c.Id)).toContain(onN2.Id);
    const status = await panel.api('GET', '/v1/panel');
    expect(status.body.scheduler.failover).toMatchObject({ brake: null, lost: [nodes[0]!.name], replaced: 1 });

    // Thawed: n1 rejoins, its set no longer holds the old copy: removed; n2 and n3 keep running.
    process.kill(frozen.process.pid, 'SIGCONT');
    const thawed = performance.now();
    const after = await waitFor(
      async () => {
        const now = await fleet.containers(serviceId);
        return now.length === 2 && byNode(now).join() === [nodes[1]!.name, nodes[2]!.name].join() ? now : undefined;
      },
      { timeoutMs: 30_000, intervalMs: 100, message: "n1's old copy removed" },
    );
    console.log(`failover: n1's old copy removed ${Math.round(performance.now() - thawed)} ms after SIGCONT`);
    expect(after.every((c) => c.State === 'running')).toBe(true);
  }, 120_000);
});
