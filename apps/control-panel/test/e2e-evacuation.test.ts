import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ensureDocker, sleep, waitFor } from '@tether/testkit';
import { FLEET_SCHEDULER_MS as SCHEDULER_MS, byNode, startFleet, type Fleet } from './helpers/node-fleet.js';
import type { Panel } from './helpers/panel-harness.js';

// Issue 36 "Maintenance" end to end: three real agents, a service with 2 replicas on two of them; evacuating one
// node moves its replica to the third (the new one healthy before the old one drains) while every container's own
// address is probed: never fewer than 2 answer. Uncordon moves nothing back. What runs is read from Docker itself.

const docker = await ensureDocker();

describe.skipIf(!docker.available)('evacuating a node: three agents → Docker', () => {
  let fleet: Fleet;
  let panel: Panel;
  let image: string;
  let teamId: string;
  let nodes: Fleet['nodes'];
  const tag = `evac-${process.pid}`;

  beforeAll(async () => {
    fleet = await startFleet({ tag, nodes: 3 });
    ({ panel, image, teamId, nodes } = fleet);
  }, 60_000);
  afterEach((context) => fleet.explain(context));
  afterAll(async () => {
    await fleet?.close();
  });

  it('evacuate n1: its replica moves to n3 with never fewer than 2 answering; the answer lists the move; uncordon moves nothing back', async () => {
    const res = await panel.api('POST', '/v1/services', { teamId, name: 'evac', image, env: { MESSAGE: 'v1' }, internalPort: 8080, replicas: 2, healthCheck: { path: '/index.html' } });
    expect(res.status).toBe(201);
    const serviceId = res.body.id as string;
    const deploy = await panel.api('POST', `/v1/services/${serviceId}/deployments`, {});
    expect(deploy.status).toBe(201);
    expect(await fleet.settled(deploy.body.id, 30_000)).toMatchObject({ status: 'running' });
    const before = await fleet.running(serviceId);
    expect(byNode(before)).toEqual([nodes[0]!.name, nodes[1]!.name]);
    const kept = before.find((c) => c.Labels['tether.node'] === nodes[1]!.name)!;

    let fewest = Infinity;
    let probes = 0;
    let done = false;
    const asked = performance.now();
    const evacuated = await panel.api('POST', `/v1/nodes/${nodes[0]!.id}/evacuate`, {});
    expect(evacuated.status).toBe(200);
    expect(evacuated.body.node).toMatchObject({ cordoned: true, evacuating: true });
    expect(evacuated.body.moves).toEqual([expect.objectContaining({ serviceId, from: nodes[0]!.name, to: nodes[2]!.name })]);
    expect(evacuated.body.refused).toEqual([]);
    const moved = waitFor(
      async () => {
        const now = await fleet.containers(serviceId);
        return now.length === 2 && byNode(now).join() === [nodes[1]!.name, nodes[2]!.name].join() && now.every((c) => c.State === 'running') ? now : undefined;
      },
      { timeoutMs: 40_000, intervalMs: 100, message: 'the replica on n1 moved to n3' },
    ).finally(() => (done = true));
    while (!done) {
      const answers = await Promise.all((await fleet.running(serviceId)).map((c) => fleet.answer(c)));
      fewest = Math.min(fewest, answers.filter((a) => a === 'v1').length);
      probes += 1;
    }
    const after = await moved;
    console.log(`evacuation: moved in ${Math.round(performance.now() - asked)} ms, ${probes} probes, fewest replicas answering ${fewest}`);
    expect(fewest).toBeGreaterThanOrEqual(2);
    // The replica on n2 never restarted.
    expect(after.map((c) => c.Id)).toContain(kept.Id);
    for (const c of after) expect(await fleet.answer(c)).toBe('v1');

    const uncordoned = await panel.api('POST', `/v1/nodes/${nodes[0]!.id}/uncordon`, {});
    expect(uncordoned.status).toBe(200);
    expect(uncordoned.body).toMatchObject({ cordoned: false, evacuating: false });
    await sleep(SCHEDULER_MS * 10);
    expect((await fleet.containers(serviceId)).map((c) => c.Id).sort()).toEqual(after.map((c) => c.Id).sort());
    const audit = await panel.api('GET', `/v1/audit?action=node.evacuate`);
    if (audit.status === 200) expect(JSON.stringify(audit.body)).toContain(nodes[0]!.id);
  }, 90_000);
});
