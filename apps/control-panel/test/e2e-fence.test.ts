import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { blackhole, ensureDocker, ensureIptables, sleep, waitFor, type Blackhole } from '@tether/testkit';
import { FENCE_MARGIN_MS } from '../src/scheduling/failover-policy.js';
import { byNode, startFleet, type Fleet, type Listed } from './helpers/node-fleet.js';

// Self-fencing end to end (issue 38): three real agents and a fenced 1-replica service. The agent running it is cut
// off from the panel for real (iptables DROP of its connection both ways: no FIN, no RST; its own timers keep
// running, unlike a frozen agent's). Its agent stops the replica once TETHER_FENCE_AFTER_MS has passed since the
// last frame it received; the panel tears the session down at its read-idle deadline and re-places the replica only
// after the teardown + the agent's fence deadline + its stop grace + FENCE_MARGIN_MS. Docker is sampled every 100 ms
// throughout: never two copies running at once.

const FENCE_AFTER_MS = 2_500;
/** The fleet's agents' TETHER_STOP_TIMEOUT_MS (helpers/node-fleet.ts). */
const STOP_TIMEOUT_MS = 2_000;
const PING_INTERVAL_MS = 1_000;
const SESSION_IDLE_MS = 3_000;
/** Shorter than the fence's wait, so the fence bound is what decides. */
const RESCHEDULE_AFTER_MS = 2_000;
const FENCED_BOUND_MS = FENCE_AFTER_MS + STOP_TIMEOUT_MS + FENCE_MARGIN_MS;
/** The scheduler interval, the image on the host, the container's start. */
const START_BOUND_MS = 6_000;

const docker = await ensureDocker();
const iptables = await ensureIptables();

describe.skipIf(!docker.available || !iptables.available)('self-fencing: a partitioned agent stops its fenced replica before the panel re-places it', () => {
  let fleet: Fleet;
  let hole: Blackhole | undefined;
  const tag = `fe-${process.pid}`;

  beforeAll(async () => {
    fleet = await startFleet({
      tag,
      nodes: 3,
      // The agents never give up on their session during the test: the cut alone decides.
      panelEnv: { TETHER_RESCHEDULE_AFTER_MS: String(RESCHEDULE_AFTER_MS), TETHER_PING_INTERVAL_MS: String(PING_INTERVAL_MS), TETHER_SESSION_IDLE_MS: String(SESSION_IDLE_MS), TETHER_AGENT_IDLE_MS: '60000' },
      agentEnv: { TETHER_FENCE_AFTER_MS: String(FENCE_AFTER_MS) },
    });
  }, 60_000);
  afterEach((context) => {
    hole?.release();
    fleet.explain(context);
  });
  afterAll(async () => {
    hole?.release();
    await fleet?.close();
  });

  it('cut off: stopped by its agent after FENCE_AFTER, replaced only after teardown + the fence bound, never two running', async () => {
    const { panel, nodes, agents } = fleet;
    const stored = await panel.prisma.node.findMany({ where: { id: { in: nodes.map((n) => n.id) } }, select: { fenceAfterMs: true, fenceStopTimeoutMs: true, capabilities: true } });
    for (const n of stored) expect(n).toMatchObject({ fenceAfterMs: FENCE_AFTER_MS, fenceStopTimeoutMs: STOP_TIMEOUT_MS, capabilities: expect.arrayContaining(['workload.fence']) });

    const res = await panel.api('POST', '/v1/services', { teamId: fleet.teamId, name: 'lock', image: fleet.image, env: { MESSAGE: 'v1' }, internalPort: 8080, replicas: 1, failover: { fence: true } });
    expect(res.status).toBe(201);
    const serviceId = res.body.id as string;
    const deploy = await panel.api('POST', `/v1/services/${serviceId}/deployments`, {});
    expect(deploy.status).toBe(201);
    expect(await fleet.settled(deploy.body.id, 30_000)).toMatchObject({ status: 'running' });
    const [first] = await fleet.running(serviceId);
    expect(first?.Labels['tether.fence']).toBe('true');
    const at = nodes.findIndex((n) => n.name === first!.Labels['tether.node']);
    const cut = nodes[at]!;

    // Docker sampled every 100 ms from here on: never more than one copy running.
    let most = 0;
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        most = Math.max(most, (await fleet.running(serviceId)).length);
        await sleep(100);
      }
    })();

    // Cut the agent's own connection (its ephemeral port) both ways; the other agents keep theirs.
    const session = panel.app.agentSide.registry.get(cut.id)!;
    const agentPort = Number(session.peer.split(':').pop());
    hole = blackhole(agentPort);
    const cutAt = performance.now();
    try {
      const fencedLine = await agents[at]!.process.waitForOutput(/\{[^\n]*fence deadline: fencing[^\n]*\}/, FENCE_AFTER_MS + 5_000);
      const fenced = JSON.parse(fencedLine[0]) as { silentForMs: number };
      const gone = await waitFor(async () => ((await fleet.running(serviceId)).some((c) => c.Id === first!.Id) ? undefined : performance.now()), {
        timeoutMs: STOP_TIMEOUT_MS + 5_000,
        intervalMs: 50,
        message: 'the fenced replica stopped on the cut node',
      });
      await waitFor(() => (panel.app.agentSide.registry.get(cut.id) ? undefined : true), { timeoutMs: SESSION_IDLE_MS + 3_000, intervalMs: 20, message: 'the cut node torn down' });
      const teardown = performance.now();
      // Nothing anywhere else before the bound (sampled every 100 ms up to 300 ms before it).
      while (performance.now() < teardown + FENCED_BOUND_MS - 300) {
        expect(byNode(await fleet.containers(serviceId)).filter((n) => n !== cut.name)).toEqual([]);
        await sleep(100);
      }
      const replacement: Listed = await waitFor(async () => (await fleet.running(serviceId)).find((c) => c.Labels['tether.node'] !== cut.name), {
        timeoutMs: FENCED_BOUND_MS + START_BOUND_MS + 5_000,
        intervalMs: 50,
        message: 'the replacement running on another node',
      });
      const runningAt = performance.now();
      const [made] = await panel.prisma.$queryRawUnsafe<{ after_ms: number }[]>(
        `SELECT (extract(epoch FROM a.created_at) - extract(epoch FROM n.last_teardown_at)) * 1000 AS after_ms
         FROM allocations a JOIN nodes n ON n.id = $2 WHERE a.service_id = $1 AND a.cause = 'node-lost'`,
        serviceId,
        cut.id,
      );
      console.log(
        `fence: agent fenced after ${fenced.silentForMs} ms of silence, replica gone ${Math.round(gone - cutAt)} ms after the cut; teardown ${Math.round(teardown - cutAt)} ms after the cut; ` +
          `replacement allocation ${Math.round(Number(made!.after_ms))} ms after the recorded teardown (bound ${FENCED_BOUND_MS}), running on ${replacement.Labels['tether.node']} ${Math.round(runningAt - teardown)} ms after teardown; at most ${most} running`,
      );
      // The agent: no earlier than its deadline after its last frame, and not long after.
      expect(fenced.silentForMs).toBeGreaterThanOrEqual(FENCE_AFTER_MS);
      expect(fenced.silentForMs).toBeLessThanOrEqual(FENCE_AFTER_MS + 500);
      expect(gone - cutAt).toBeLessThanOrEqual(FENCE_AFTER_MS + STOP_TIMEOUT_MS + 1_500);
      // The panel: never before the bound from the recorded teardown, and within the start bound after it.
      expect(Number(made!.after_ms)).toBeGreaterThanOrEqual(FENCED_BOUND_MS);
      expect(runningAt - teardown).toBeGreaterThanOrEqual(FENCED_BOUND_MS - 100);
      expect(runningAt - teardown).toBeLessThanOrEqual(FENCED_BOUND_MS + START_BOUND_MS);
    } finally {
      hole.release();
      sampling = false;
      await sampler;
    }
    expect(most).toBe(1);
  }, 90_000);
});
