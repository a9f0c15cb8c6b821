import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ensureDocker, sleep, waitFor } from '@tether/testkit';
import { FLEET_SCHEDULER_MS as SCHEDULER_MS, byNode, startFleet, type Fleet } from './helpers/node-fleet.js';
import type { Panel } from './helpers/panel-harness.js';
import { countBy } from './scheduling/fixtures.js';

// Issue 36 end to end: a service's replicas spread over three real agents (one Docker engine, each agent its own
// node name and network), placed by the scheduler, sent as allocations, run and reported by the agents. What runs
// is read from Docker itself (the tether.node and tether.allocation labels), not from the panel's own answers.

const docker = await ensureDocker();

describe.skipIf(!docker.available)('services across nodes: scheduler → allocations → three agents → Docker', () => {
  let fleet: Fleet;
  let panel: Panel;
  let image: string;
  let teamId: string;
  let nodes: Fleet['nodes'];
  const tag = `alloc-${process.pid}`;

  beforeAll(async () => {
    fleet = await startFleet({ tag, nodes: 3 });
    ({ panel, image, teamId, nodes } = fleet);
  }, 60_000);
  afterEach((context) => fleet.explain(context));
  afterAll(async () => {
    await fleet?.close();
  });

  let serviceId: string;
  let firstRelease: string;

  it('replicas: 3 on three capable nodes → one container on each node, each answering on its own address', async () => {
    const res = await panel.api('POST', '/v1/services', { teamId, name: 'spread', image, env: { MESSAGE: 'v1' }, internalPort: 8080, replicas: 3, healthCheck: { path: '/index.html' } });
    expect(res.status).toBe(201);
    serviceId = res.body.id;
    const asked = performance.now();
    const deploy = await panel.api('POST', `/v1/services/${serviceId}/deployments`, {});
    expect(deploy.status).toBe(201);
    firstRelease = deploy.body.id;
    expect(await fleet.settled(firstRelease, 30_000)).toMatchObject({ status: 'running' });
    console.log(`replicas 3 across 3 nodes: deployment running ${Math.round(performance.now() - asked)} ms after the POST`);
    const list = await fleet.running(serviceId);
    expect(byNode(list)).toEqual(nodes.slice(0, 3).map((n) => n.name).sort());
    for (const c of list) {
      expect(c.Labels['tether.deployment']).toBe(firstRelease);
      expect(c.Labels['tether.allocation']).toMatch(/.+/);
      expect(await fleet.answer(c)).toBe('v1');
    }
  });

  it('replicas: 2 removes exactly one container and leaves the other two untouched', async () => {
    const before = await fleet.running(serviceId);
    expect((await panel.api('PATCH', `/v1/services/${serviceId}`, { replicas: 2 })).status).toBe(200);
    const after = await waitFor(
      async () => {
        const now = await fleet.containers(serviceId);
        return now.length === 2 ? now : undefined;
      },
      { timeoutMs: 10_000, intervalMs: 50, message: 'one container removed' },
    );
    expect(after.every((c) => c.State === 'running')).toBe(true);
    const kept = new Set(before.map((c) => c.Id));
    expect(after.every((c) => kept.has(c.Id))).toBe(true);
    // Several scheduler passes later nothing else has moved.
    await sleep(SCHEDULER_MS * 5);
    expect((await fleet.containers(serviceId)).map((c) => c.Id).sort()).toEqual(after.map((c) => c.Id).sort());
  });

  it('a fourth node moves nothing', async () => {
    const before = (await fleet.containers(serviceId)).map((c) => c.Id).sort();
    await fleet.addNode(`${tag}-n4`);
    await sleep(SCHEDULER_MS * 10);
    expect((await fleet.containers(serviceId)).map((c) => c.Id).sort()).toEqual(before);
  });

  it('a new release rolls out node by node with never fewer than 2 replicas answering; a release failing its health check ends failed and every replica stays on the old one', async () => {
    expect((await panel.api('PATCH', `/v1/services/${serviceId}`, { env: { MESSAGE: 'v2' } })).status).toBe(200);
    const deploy = await panel.api('POST', `/v1/services/${serviceId}/deployments`, {});
    expect(deploy.status).toBe(201);
    let fewest = Infinity;
    let probes = 0;
    let done = false;
    const settledRow = fleet.settled(deploy.body.id, 40_000).finally(() => (done = true));
    while (!done) {
      const answers = await Promise.all((await fleet.running(serviceId)).map((c) => fleet.answer(c)));
      fewest = Math.min(fewest, answers.filter((a) => a === 'v1' || a === 'v2').length);
      probes += 1;
    }
    expect(await settledRow).toMatchObject({ status: 'running' });
    console.log(`rollout across nodes: ${probes} probes, fewest replicas answering ${fewest}`);
    expect(fewest).toBeGreaterThanOrEqual(2);
    const list = await fleet.running(serviceId);
    expect(list).toHaveLength(2);
    for (const c of list) expect(await fleet.answer(c)).toBe('v2');

    const good = list.map((c) => c.Id).sort();
    expect((await panel.api('PATCH', `/v1/services/${serviceId}`, { env: { MESSAGE: 'v3' }, healthCheck: { path: '/missing', intervalSeconds: 1, unhealthyThreshold: 1, startPeriodSeconds: 0 } })).status).toBe(200);
    const bad = await panel.api('POST', `/v1/services/${serviceId}/deployments`, {});
    expect(bad.status).toBe(201);
    const failed = await fleet.settled(bad.body.id, 60_000);
    console.log(`failing release: ${failed.status}: ${failed.reason}`);
    expect(failed.status).toBe('failed');
    expect(failed.reason).toMatch(new RegExp(nodes.map((n) => n.name).join('|')));
    const after = await waitFor(
      async () => {
        const now = await fleet.containers(serviceId);
        return now.length === 2 ? now : undefined;
      },
      { timeoutMs: 10_000, intervalMs: 100, message: 'the failed release removed' },
    );
    expect(after.map((c) => c.Id).sort()).toEqual(good);
    for (const c of after) expect(await fleet.answer(c)).toBe('v2');
  });

  /**
   * Sets the service's rollout and MESSAGE, deploys, and watches until the deployment is final: how many allocations
   * the scheduler had on the release at each look, the most containers running on one node, the fewest answering.
   */
  async function watchRollout(rollout: Record<string, number | null>, message: string, previous: string) {
    const patched = await panel.api('PATCH', `/v1/services/${serviceId}`, { env: { MESSAGE: message }, healthCheck: { path: '/index.html' }, rollout });
    expect(patched.body.rollout).toEqual(rollout);
    const asked = performance.now();
    const deploy = await panel.api('POST', `/v1/services/${serviceId}/deployments`, {});
    expect(deploy.status).toBe(201);
    expect(deploy.body.spec.rollout).toEqual(rollout);
    const onRelease = new Set<number>();
    let mostOnANode = 0;
    let fewest = Infinity;
    let done = false;
    const settledRow = fleet.settled(deploy.body.id, 30_000).finally(() => (done = true));
    while (!done) {
      const rows = await panel.prisma.allocation.findMany({ where: { serviceId, desired: 'run' }, select: { releaseId: true } });
      onRelease.add(rows.filter((r) => r.releaseId === deploy.body.id).length);
      const list = await fleet.running(serviceId);
      for (const count of countBy(list, (c) => c.Labels['tether.node'] ?? '').values()) mostOnANode = Math.max(mostOnANode, count);
      const answers = await Promise.all(list.map((c) => fleet.answer(c)));
      fewest = Math.min(fewest, answers.filter((a) => a === previous || a === message).length);
    }
    expect(await settledRow).toMatchObject({ status: 'running' });
    const seen = { onRelease: [...onRelease].sort(), mostOnANode, fewest };
    console.log(`rollout ${JSON.stringify(rollout)}: running ${Math.round(performance.now() - asked)} ms after the POST; ${JSON.stringify(seen)}`);
    const list = await fleet.running(serviceId);
    expect(list).toHaveLength(2);
    for (const c of list) expect(await fleet.answer(c)).toBe(message);
    return seen;
  }

  it('rollout.maxSurge 2: both replicas move to the release in one step (never one without the other), never fewer than 2 answering', async () => {
    const seen = await watchRollout({ maxSurge: 2, maxUnavailable: null, progressDeadlineSeconds: null }, 'v4', 'v2');
    // With maxSurge 1 the same look sees 1 (one step per replica).
    expect(seen.onRelease).not.toContain(1);
    expect(seen.onRelease).toContain(2);
    expect(seen.fewest).toBeGreaterThanOrEqual(2);
  });

  it('rollout maxSurge 0, maxUnavailable 1: one replica at a time, its old container stopped before the new one starts (never two on a node), never fewer than 1 answering', async () => {
    const seen = await watchRollout({ maxSurge: 0, maxUnavailable: 1, progressDeadlineSeconds: null }, 'v5', 'v4');
    expect(seen.onRelease).toContain(1);
    // Without the release's stopFirst the same look sees 2 on a node (the new container beside the old).
    expect(seen.mostOnANode).toBe(1);
    expect(seen.fewest).toBeGreaterThanOrEqual(1);
  });

  it('capacity honest: labels no node carries → 201 without a node, pending; its deployment waits; a node labelled → runs there with no other request', async () => {
    const res = await panel.api('POST', '/v1/services', { teamId, name: 'gpu', image, env: { MESSAGE: 'gpu' }, internalPort: 8080, replicas: 1, placement: { labels: { gpu: 'yes' } } });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ nodeId: null, nodeName: null, pending: { count: 1, code: 'NO_NODE_MATCHES_LABELS' } });
    const deploy = await panel.api('POST', `/v1/services/${res.body.id}/deployments`, {});
    expect(deploy.status).toBe(201);
    expect(deploy.body).toMatchObject({ status: 'pending', nodeId: null });
    await sleep(SCHEDULER_MS * 5);
    expect(await fleet.containers(res.body.id)).toEqual([]);
    expect((await panel.api('GET', `/v1/services/${res.body.id}/status`)).body).toMatchObject({ state: 'pending', node: null, allocations: [{ allocationId: null, state: 'pending', code: 'NO_NODE_MATCHES_LABELS' }] });

    const target = nodes[2]!;
    const labelled = performance.now();
    expect((await panel.api('PATCH', `/v1/nodes/${target.id}`, { labels: { gpu: 'yes' } })).status).toBe(200);
    expect(await fleet.settled(deploy.body.id, 30_000)).toMatchObject({ status: 'running' });
    console.log(`capacity honest: the waiting deployment running ${Math.round(performance.now() - labelled)} ms after the node was labelled`);
    const list = await fleet.running(res.body.id);
    expect(byNode(list)).toEqual([target.name]);
    expect(await fleet.answer(list[0]!)).toBe('gpu');
    expect((await panel.api('GET', `/v1/services/${res.body.id}`)).body).toMatchObject({ nodeId: target.id, nodeName: target.name, pending: null });
  });
});
