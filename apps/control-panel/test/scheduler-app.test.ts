import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAPABILITIES } from '@tether/protocol';
import { startRestPanel, stopSharedPostgres, sharedPostgres, type RestPanel } from './helpers/rest-harness.js';

// The scheduler inside the real app (issue 36), over HTTP: the panel's own
// Scheduler (lifecycle slot, lease, loop, nudges) places a managed service's
// replicas and rolls a deployment out while `?wait=` waits on the row. No
// agents: nodes have the capability and live sessions (owner and report rows
// of another panel whose lease is live), and the allocations' status rows are
// written as the session side's ingestion writes them.

let p: RestPanel;
const nodes: Record<string, string> = {};
const sql = (text: string, ...values: unknown[]) => p.prisma.$executeRawUnsafe(text, ...values);

beforeAll(async () => {
  p = await startRestPanel({ pg: await sharedPostgres(), env: { TETHER_ALLOCATIONS: 'on', TETHER_SCHEDULER_INTERVAL_MS: '100', TETHER_SCHEDULER_LEASE_MS: '1000' } });
  await sql(`INSERT INTO panels (id, lease_until, renewed_at) VALUES ('owner', now() + interval '1 hour', now())`);
  for (const name of ['a', 'b', 'c']) {
    const node = await p.node(name);
    nodes[name] = node.id;
    await sql(`UPDATE nodes SET capabilities = $2 WHERE id = $1`, node.id, [CAPABILITIES.WORKLOAD_ALLOCATIONS]);
    await sql(`INSERT INTO node_owners (node_id, panel_id, session_id, generation, claimed_at) VALUES ($1, 'owner', $2, 1, now())`, node.id, `sess-${name}`);
    await sql(
      `INSERT INTO node_reports (node_id, panel_id, session_id, generation, state, last_frame_at, report, updated_at) VALUES ($1, 'owner', $2, 1, 'connected', now(), '{}', now())`,
      node.id,
      `sess-${name}`,
    );
  }
}, 60_000);

afterAll(async () => {
  await p?.close();
  await stopSharedPostgres();
});

describe('the scheduler in the app', () => {
  it('a managed service spreads over the three nodes; its deployment answers 201, rolls out as replicas report it healthy, and ?wait= answers it running', async () => {
    const team = await p.team('sched-app');
    const created = await p.call('POST', '/v1/services', { token: team.token, body: { name: 'web', image: 'nginx', replicas: 3 } });
    expect(created.status).toBe(201);
    const serviceId = created.body.id as string;
    const nudges: string[] = [];
    p.events.on('scheduler.nudge', ({ reason }) => nudges.push(reason));

    const deploy = p.call('POST', `/v1/services/${serviceId}/deployments?wait=20`, { token: team.token });
    // The ingestion the session side will do: each allocation reports the release it was given, running and healthy.
    const reported = new Set<string>();
    let answer: Awaited<typeof deploy> | undefined;
    void deploy.then((a) => (answer = a));
    const started = Date.now();
    while (!answer && Date.now() - started < 20_000) {
      const rows = await p.prisma.$queryRawUnsafe<{ id: string; release_id: string | null }[]>(
        `SELECT id, release_id FROM allocations WHERE service_id = $1 AND desired = 'run' AND release_id IS NOT NULL`,
        serviceId,
      );
      for (const row of rows) {
        const key = `${row.id}/${row.release_id}`;
        if (reported.has(key)) continue;
        reported.add(key);
        await sql(
          `UPDATE allocations SET status = $2::jsonb, status_at = now(), status_session = 'sess' WHERE id = $1`,
          row.id,
          JSON.stringify({ state: 'running', runningDeploymentId: row.release_id, health: 'healthy', containerId: 'c', code: null, reason: null, since: new Date().toISOString() }),
        );
        p.events.emit('allocations.reported', { nodeId: 'x' });
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(answer?.status).toBe(200);
    expect(answer?.body).toMatchObject({ status: 'running', final: true, nodeId: expect.any(String) });
    expect(answer?.body.reason).toBe('running: 3 of 3 replicas run it healthy on a, b, c');
    const placed = await p.prisma.allocation.findMany({ where: { serviceId, desired: 'run' }, include: { node: true } });
    expect(placed.map((a) => a.node.name).sort()).toEqual(['a', 'b', 'c']);
    expect(placed.every((a) => a.releaseId === answer?.body.id)).toBe(true);
    // Never sent as a deploy frame (no session took it); the nudges came from the API and the reported statuses.
    expect(answer?.body.sessionId).toBeNull();
    expect(nudges).toContain(`deployment ${answer?.body.id} created`);

    // Scale down through the API: the update's nudge makes the scheduler stop exactly one replica, at once.
    const patched = await p.call('PATCH', `/v1/services/${serviceId}`, { token: team.token, body: { replicas: 2 } });
    expect(patched.status).toBe(200);
    const patchedAt = Date.now();
    let stopped: { desired: string }[] = [];
    while (Date.now() - patchedAt < 5_000) {
      stopped = await p.prisma.allocation.findMany({ where: { serviceId, desired: 'stop' } });
      if (stopped.length > 0) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    expect(stopped).toHaveLength(1);
    expect(await p.prisma.allocation.count({ where: { serviceId, desired: 'run' } })).toBe(2);
  });
});
