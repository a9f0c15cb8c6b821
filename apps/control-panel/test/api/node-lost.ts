import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { code, sharedPostgres, startRestPanel, type RestPanel } from '../helpers/rest-harness.js';

// POST /v1/nodes/:id/lost (issue 38): an operator says a node's host is gone. The REST panel holds no session, so
// a node is made live the way another panel's session makes it: a report row of that panel's (lease live) for the
// node's owned generation (what the scheduler and the new-home choice read).

describe('POST /v1/nodes/:id/lost', () => {
  let p: RestPanel;

  beforeAll(async () => {
    p = await startRestPanel({ pg: await sharedPostgres() });
    await p.prisma.$executeRaw`INSERT INTO panels (id, lease_until, renewed_at) VALUES ('other-panel', now() + interval '1 hour', now())`;
  });

  afterAll(async () => {
    await p?.close();
  });

  async function live(nodeId: string): Promise<void> {
    await p.prisma.$executeRaw`INSERT INTO node_owners (node_id, panel_id, session_id, generation, claimed_at) VALUES (${nodeId}, 'other-panel', ${`s-${nodeId}`}, 1, now())`;
    await p.prisma.$executeRaw`INSERT INTO node_reports (node_id, panel_id, session_id, generation, state, last_frame_at, report, updated_at)
      VALUES (${nodeId}, 'other-panel', ${`s-${nodeId}`}, 1, 'connected', now(), '{}'::jsonb, now())`;
  }

  it('refuses without {"confirm": true} (400 CONFIRMATION_REQUIRED, nothing changed), an unknown node (404), a customer (403)', async () => {
    const node = await p.node('confirm-a');
    for (const body of [undefined, {}, { confirm: false }]) {
      const res = await code(p.call('POST', `/v1/nodes/${node.id}/lost`, body === undefined ? {} : { body }));
      expect(res).toMatchObject({ status: 400, code: 'CONFIRMATION_REQUIRED' });
      expect(res.message).toContain('"confirm": true');
    }
    expect((await p.prisma.node.findUniqueOrThrow({ where: { id: node.id } })).decommissioned).toBe(false);
    expect(await code(p.call('POST', '/v1/nodes/nope/lost', { body: { confirm: true } }))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
    const team = await p.team('lost-customer');
    expect(await code(p.call('POST', `/v1/nodes/${node.id}/lost`, { token: team.token, body: { confirm: true } }))).toMatchObject({ status: 403 });
  });

  it('decommissions, marks lost, moves each service homed there to a live node its placement allows (volumes empty, domains follow); idempotent', async () => {
    const [gone, spare, cordoned, dead] = [await p.node('lost-a'), await p.node('lost-b'), await p.node('lost-c'), await p.node('lost-d')];
    await live(spare.id);
    await live(cordoned.id);
    expect((await p.call('POST', `/v1/nodes/${cordoned.id}/cordon`)).status).toBe(200);
    const team = await p.team('lost-team');
    const create = async (name: string, extra: Record<string, unknown> = {}) => {
      const res = await p.call('POST', '/v1/services', { token: team.token, body: { name, image: 'nginx', node: 'lost-a', internalPort: 80, ...extra } });
      expect(res.status).toBe(201);
      return res.body.id as string;
    };
    const db = await create('db', { volumes: [{ name: 'data', mountPath: '/data' }] });
    const web = await create('web');
    const pinned = await create('pinned');
    const gpu = await create('gpu');
    // Placements as a customer would have changed them: anywhere (db, web), a label no live node carries (gpu).
    await p.prisma.service.updateMany({ where: { id: { in: [db, web] } }, data: { placement: { nodes: [], labels: {} } } });
    await p.prisma.service.update({ where: { id: gpu }, data: { placement: { nodes: [], labels: { gpu: 'yes' } } } });
    expect((await p.call('POST', '/v1/routes', { token: team.token, body: { domain: 'lost.example.com', serviceId: web } })).status).toBe(201);
    const pending = await p.call('POST', `/v1/services/${db}/deployments`, { token: team.token });
    expect(pending.body.status).toBe('pending');

    const nudges: string[] = [];
    p.events.on('scheduler.nudge', ({ reason }) => nudges.push(reason));
    p.emitted.length = 0;
    const res = await p.call('POST', `/v1/nodes/${gone.id}/lost`, { body: { confirm: true } });
    expect(res.status).toBe(200);
    expect(res.body.node).toMatchObject({ id: gone.id, decommissioned: true, decommissionedAt: expect.any(String), lostAt: expect.any(String) });
    expect(res.body.moved).toEqual([
      { serviceId: db, serviceName: 'db', from: 'lost-a', to: 'lost-b', emptyVolumes: [{ name: 'data', mountPath: '/data' }] },
      { serviceId: web, serviceName: 'web', from: 'lost-a', to: 'lost-b', emptyVolumes: [] },
    ]);
    expect(res.body.pending).toEqual([
      { serviceId: gpu, serviceName: 'gpu', code: 'NO_NODE_MATCHES_LABELS', message: expect.stringContaining('gpu=yes') },
      { serviceId: pinned, serviceName: 'pinned', code: 'NO_NODE_AVAILABLE', message: expect.stringContaining('among lost-a') },
    ]);
    // Neither the cordoned nor the unreachable node was chosen; the domain followed its service.
    expect((await p.prisma.service.findMany({ where: { nodeId: { in: [cordoned.id, dead.id] } } })).length).toBe(0);
    expect((await p.prisma.domain.findUniqueOrThrow({ where: { name: 'lost.example.com' } })).nodeId).toBe(spare.id);
    expect((await p.call('GET', `/v1/deployments/${pending.body.id}`, { token: team.token })).body).toMatchObject({ status: 'failed', reason: 'the node was decommissioned' });
    const names = p.emitted.map((e) => e.name);
    expect(names.filter((n) => n === 'node.decommissioned')).toHaveLength(1);
    expect(p.emitted).toContainEqual({ name: 'workloads.changed', payload: { nodeId: spare.id, reason: 'service db moved here: node lost-a declared lost' } });
    expect(p.emitted).toContainEqual({ name: 'routing.changed', payload: { nodeIds: expect.arrayContaining([gone.id, spare.id]), reason: 'service web moved: node lost-a declared lost' } });
    expect(nudges).toContain('node declared lost');
    const audit = await p.prisma.auditEvent.findMany({ where: { targetId: gone.id, action: 'node.lost' } });
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ outcome: 'success', targetType: 'node' });

    // Again: the same shape, nothing moved, no new event or audit row; what had nowhere to go is still listed.
    p.emitted.length = 0;
    const again = await p.call('POST', `/v1/nodes/${gone.id}/lost`, { body: { confirm: true } });
    expect(again.status).toBe(200);
    expect(again.body.node.lostAt).toBe(res.body.node.lostAt);
    expect(again.body.moved).toEqual([]);
    expect(again.body.pending.map((x: { serviceName: string }) => x.serviceName)).toEqual(['gpu', 'pinned']);
    expect(p.emitted).toEqual([]);
    expect(await p.prisma.auditEvent.count({ where: { targetId: gone.id, action: 'node.lost' } })).toBe(1);

    // A node that fits later: declaring it lost again moves what was left.
    await p.prisma.service.update({ where: { id: pinned }, data: { placement: { nodes: ['lost-a', 'lost-b'], labels: {} } } });
    const third = await p.call('POST', `/v1/nodes/${gone.id}/lost`, { body: { confirm: true } });
    expect(third.body.moved.map((m: { serviceName: string; to: string }) => `${m.serviceName}>${m.to}`)).toEqual(['pinned>lost-b']);
  });
});
