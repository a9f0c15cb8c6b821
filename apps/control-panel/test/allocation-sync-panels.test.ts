import { describe, expect, it } from 'vitest';
import { CAPABILITIES, type PanelMessage } from '@tether/protocol';
import { waitFor } from '@tether/testkit';
import { usePanels } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';

// Allocations across two panels on one database (issue 36): the scheduler
// runs on one panel (the lease holder) and calls changed(nodeId) for nodes
// whose session another panel holds; the owner sends the new set. Status per
// replica read on the other panel proves the replica by the owner's live
// session (its report row) and reads what the owner recorded.

type Allocations = Extract<PanelMessage, { type: 'allocations' }>;
const CAPABLE = [CAPABILITIES.WORKLOAD_ALLOCATIONS];

const { panels, cleanup } = usePanels(['a', 'b'], { TETHER_PANEL_LEASE_MS: '3000', TETHER_PING_INTERVAL_MS: '1000', TETHER_ALLOCATIONS: 'on' });
const [a, b] = panels as [(typeof panels)[0], (typeof panels)[0]];

describe('allocations across panels', () => {
  it("changed() on a panel without the node's session reaches its owner; status on the other panel reads the owner's replicas", async () => {
    // The test writes allocation rows as the scheduler would: the panels' own schedulers, stopped, place nothing over
    // them (one whole CI run saw a periodic pass place a replica between the agent's open and the test's row).
    await Promise.all([a.app.scheduler.stop(), b.app.scheduler.stop()]);
    const teamId = (await a.api('POST', '/v1/teams', { name: `alloc-panels-${process.pid}` })).body.id;
    const node = await a.createNode('alloc-x');
    const svc = await a.api('POST', '/v1/services', { teamId, name: 'alloc-x-web', image: 'busybox:1', node: node.name });
    expect(svc.status).toBe(201);
    const spec = { name: 'alloc-x-web', image: 'busybox:1', env: {}, internalPort: null, replicas: 1 };
    const agent = await RawAgent.connect({ url: a.url, token: node.token, node: node.name, capabilities: CAPABLE });
    cleanup.push(() => agent.close());
    const first = await agent.waitFor<Allocations>((m) => m.type === 'allocations');
    expect(first.allocations).toEqual([]);
    // Made after the first set: a running release with no allocation yet awaits its adoption, and holds the set.
    const release = await a.prisma.deployment.create({ data: { serviceId: svc.body.id, nodeId: node.id, spec, status: 'running' } });

    const row = await a.prisma.allocation.create({ data: { serviceId: svc.body.id, nodeId: node.id, releaseId: release.id, cause: 'scale-up', epoch: 1n } });
    expect(b.app.agentSide.registry.get(node.id)).toBeUndefined();
    b.app.agentSide.allocations.changed(node.id, 'test: placed by the scheduler on panel b');
    const next = await agent.waitFor<Allocations>((m) => m.type === 'allocations' && m.allocations.length === 1, 10_000);
    expect(next.allocations[0]).toEqual({ allocationId: row.id, serviceId: svc.body.id, deploymentId: release.id });
    expect(next.releases.map((r) => r.deploymentId)).toEqual([release.id]);

    const since = new Date().toISOString();
    agent.send({
      type: 'allocations.status',
      id: 'st-x',
      ref: next.id,
      allocations: [{ allocationId: row.id, serviceId: svc.body.id, deploymentId: release.id, runningDeploymentId: release.id, state: 'running', containerId: 'c1', health: 'none', code: null, reason: null, since }],
    });
    // The container as the node's heartbeat shows it: a replica counts only once its node's report names its container.
    agent.heartbeat([{ containerId: 'c1', serviceId: svc.body.id, deploymentId: release.id, name: 'alloc-x-web-1', state: 'running', exitCode: null, health: 'none', restartCount: 0, since, allocationId: row.id }]);
    // Read on panel b: the node's session is panel a's (proved by its report), the replica is running.
    const status = await waitFor(
      async () => {
        const res = await b.api('GET', `/v1/services/${svc.body.id}/status`);
        return res.body.runningReplicas === 1 ? res : undefined;
      },
      { timeoutMs: 15_000 },
    );
    expect(status.body).toMatchObject({ desiredReplicas: 1, runningReplicas: 1, unknownReplicas: 0, state: 'running' });
    expect(status.body.allocations).toEqual([
      expect.objectContaining({ allocationId: row.id, state: 'running', node: { id: node.id, name: node.name }, evidence: expect.objectContaining({ sessionId: agent.welcome.sessionId }) }),
    ]);
  });
});
