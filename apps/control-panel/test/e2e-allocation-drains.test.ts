import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ensureDocker } from '@tether/testkit';
import { byNode, startFleet, type Fleet } from './helpers/node-fleet.js';
import { openTextStream, type TextStream } from './helpers/text-stream.js';

// Issue 36 end to end: the drain of a deployment managed by allocations, with two real agents (one Docker engine,
// each agent its own node name and network; no proxy, so nothing is proxied and every drain counts 0 and 0) and the
// panel's scheduler. A 2-replica release rolls out node by node; each agent reports each rollout's drain in
// allocations.drained; the deployment reads reportsDrain true, its events stream ends with `drained` once both nodes
// reported (0 and 0: nothing is proxied), both nodes' reports are recorded, and no old container is left.

const docker = await ensureDocker();
const events = (stream: TextStream) => [...stream.text.matchAll(/^event: (\S+)\nid: \d+\ndata: (.*)$/gm)].map((m) => ({ event: m[1]!, data: JSON.parse(m[2]!) }));

describe.skipIf(!docker.available)('the drain of a managed deployment over two real agents', () => {
  let fleet: Fleet;
  const tag = `adrn-${process.pid}`;

  beforeAll(async () => {
    fleet = await startFleet({ tag, nodes: 2 });
  }, 60_000);
  afterEach((context) => fleet.explain(context));
  afterAll(async () => {
    await fleet?.close();
  });

  it('each release over both nodes reports its drain: reportsDrain, the stream\'s drained event, 0 and 0 without a proxy', async () => {
    const { panel, image, teamId, nodes } = fleet;
    const auth = { authorization: `Bearer ${panel.operatorToken}` };
    const svc = await panel.api('POST', '/v1/services', { teamId, name: 'drains', image, env: { MESSAGE: 'v1' }, internalPort: 8080, replicas: 2, drainSeconds: 5 });
    expect(svc.status).toBe(201);
    const serviceId = svc.body.id as string;

    for (const message of ['v1', 'v2']) {
      if (message !== 'v1') expect((await panel.api('PATCH', `/v1/services/${serviceId}`, { env: { MESSAGE: message } })).status).toBe(200);
      const asked = performance.now();
      const deploy = await panel.api('POST', `/v1/services/${serviceId}/deployments`, {});
      expect(deploy.status).toBe(201);
      const id = deploy.body.id as string;
      const stream = await openTextStream(`${panel.url}/v1/deployments/${id}/events`, { headers: auth });
      await stream.ended;
      const endedMs = Math.round(performance.now() - asked);
      const all = events(stream);
      const last = all.at(-1)!;
      console.log(`managed drain over 2 agents (${message}): stream ended with ${last.event} ${endedMs} ms after the POST; ${JSON.stringify({ open: last.data.connectionsOpenAtSwitch, cut: last.data.connectionsCut, runningAt: last.data.runningAt, drainEndedAt: last.data.drainEndedAt })}`);
      // Without a proxy a node's drain ends at its switch, so the last report may come before the scheduler records
      // `running` (then the running write records the drain too); either way every running event says reportsDrain.
      const runningEvents = all.filter((e) => e.data.status === 'running');
      expect(runningEvents.length).toBeGreaterThanOrEqual(1);
      expect(runningEvents.every((e) => e.data.reportsDrain === true)).toBe(true);
      expect(last).toMatchObject({ event: 'drained', data: { id, status: 'running', final: true, reportsDrain: true, connectionsOpenAtSwitch: 0, connectionsCut: 0, drainEndedAt: expect.any(String) } });
      expect(Date.parse(last.data.drainEndedAt)).toBeGreaterThanOrEqual(Date.parse(last.data.runningAt) - 1_000);
      // Well before the report grace (drainSeconds 5 + 660 s): the reports ended it, not the give-up.
      expect(endedMs).toBeLessThan(30_000);
      const running = await fleet.running(serviceId);
      expect(byNode(running)).toEqual(nodes.map((n) => n.name).sort());
      expect(running.every((c) => c.Labels['tether.deployment'] === id)).toBe(true);
      const reports = await panel.prisma.deploymentDrain.findMany({ where: { deploymentId: id }, include: { node: true } });
      expect(reports.map((r) => r.node.name).sort()).toEqual(nodes.map((n) => n.name).sort());
    }
  });
});
