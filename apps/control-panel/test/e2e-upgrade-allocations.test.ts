import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { dockerApi, ensureDocker, ensureWebImage, sleep, startTestPostgres, waitFor, type TestPostgres } from '@tether/testkit';
import { sqlOf } from '../src/db/database.js';
import { startAgentProcess, type AgentProcess } from './helpers/agent-process.js';
import { AGENT_ENV, type Listed } from './helpers/node-fleet.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';

// Issue 36's upgrade: a single-node service with 3 replicas, deployed the way every release before allocations
// deploys (a panel that does not confirm workload.allocations: deploy frames, replica slots), is untouched when
// its panel and agent are upgraded to allocations. The scheduler adopts what runs (cause `adopted`), the agent
// binds the same containers: Docker's own list and start times are the evidence, not the panel's answers.

const docker = await ensureDocker();

const PANEL_ENV = {
  TETHER_SCHEDULER_INTERVAL_MS: '200',
  TETHER_HEARTBEAT_INTERVAL_MS: '300',
  TETHER_PING_INTERVAL_MS: '1000',
  TETHER_SESSION_IDLE_MS: '3000',
  TETHER_AGENT_IDLE_MS: '5000',
};

describe.skipIf(!docker.available)('upgrade to allocations: a 3-replica single-node service keeps its containers', () => {
  let pg: TestPostgres;
  let databaseUrl: string;
  let panel: Panel | undefined;
  let agent: AgentProcess | undefined;
  const tag = `upgrade-${process.pid}`;

  beforeAll(async () => {
    pg = await startTestPostgres();
    databaseUrl = await pg.createDatabase();
  }, 60_000);
  afterEach((context) => {
    if (context.task.result?.state !== 'fail') return;
    if (agent) console.error(`--- agent:\n${agent.process.output().slice(-4_000)}`);
    if (panel) console.error(`--- panel warnings:\n${panel.recentLogs()}`);
  });
  afterAll(async () => {
    await agent?.destroy();
    await panel?.close();
    await pg?.stop();
  });

  const containers = async (serviceId: string) => {
    const filters = encodeURIComponent(JSON.stringify({ label: [`tether.service=${serviceId}`] }));
    return JSON.parse((await dockerApi('GET', `/containers/json?all=1&filters=${filters}`)).body) as Listed[];
  };
  const sessionOf = async (nodeId: string) => {
    await waitFor(() => panel!.app.agentSide.registry.get(nodeId), { timeoutMs: 10_000, message: 'the agent session' });
    await panel!.settled();
  };
  const startedAt = async (id: string) => (JSON.parse((await dockerApi('GET', `/containers/${id}/json`)).body) as { State: { StartedAt: string } }).State.StartedAt;

  it('adopted on the upgrade: same container ids and start times, allocations made from them, 3/3 running', async () => {
    const image = await ensureWebImage();
    // Before: a panel without allocations (the agent announces the capability, the welcome does not confirm it).
    panel = await startPanel({ databaseUrl, env: { ...PANEL_ENV, TETHER_ALLOCATIONS: 'off' } });
    const teamId = (await panel.api('POST', '/v1/teams', { name: tag })).body.id as string;
    const node = await panel.createNode(`${tag}-n1`);
    agent = await startAgentProcess({ panelUrl: panel.url, token: node.token, nodeName: node.name, runtime: 'docker', env: AGENT_ENV });
    await sessionOf(node.id);
    const created = await panel.api('POST', '/v1/services', { teamId, name: 'kept', image, env: { MESSAGE: 'v1' }, internalPort: 8080, replicas: 3, healthCheck: { path: '/index.html' } });
    expect(created.status).toBe(201);
    const serviceId = created.body.id as string;
    const deploy = await panel.api('POST', `/v1/services/${serviceId}/deployments?wait=30`, {});
    expect(deploy.body).toMatchObject({ status: 'running' });
    const before = (await containers(serviceId)).filter((c) => c.State === 'running');
    expect(before).toHaveLength(3);
    // Replica slots of the deploy path: no allocation label, and no allocation row.
    expect(before.every((c) => c.Labels['tether.allocation'] === undefined)).toBe(true);
    expect(await sqlOf(panel.prisma).rows(`SELECT id FROM allocations WHERE service_id = $1`, [serviceId])).toEqual([]);
    const starts = new Map(await Promise.all(before.map(async (c) => [c.Id, await startedAt(c.Id)] as const)));

    // The upgrade: the panel restarted with allocations on, the agent restarted on its state folder.
    await agent.stop();
    await panel.close();
    panel = await startPanel({ databaseUrl, env: { ...PANEL_ENV, TETHER_ALLOCATIONS: 'on' } });
    const upgradedAt = performance.now();
    agent = await startAgentProcess({ panelUrl: panel.url, token: node.token, nodeName: node.name, runtime: 'docker', env: AGENT_ENV, stateDir: agent.stateDir });

    let last = '';
    type Row = { cause: string; status: { state: string; containerId: string } | null; release_id: string | null };
    const adopted = await waitFor(
      async (): Promise<Row[] | undefined> => {
        const rows = await sqlOf(panel!.prisma).rows<Row>(
          `SELECT cause, status, release_id FROM allocations WHERE service_id = $1 AND desired = 'run'`,
          [serviceId],
        );
        const s = (await panel!.api('GET', `/v1/services/${serviceId}/status`)).body as { state: string; runningReplicas: number | null };
        last = JSON.stringify({ rows, state: s.state, running: s.runningReplicas });
        return rows.length === 3 && rows.every((r) => r.status?.state === 'running') && s.state === 'running' && s.runningReplicas === 3 ? rows : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 50, message: 'three adopted allocations reported running, status 3/3' },
    ).catch((err: Error) => {
      throw new Error(`${err.message} (last: ${last})`);
    });
    console.log(`upgrade: 3 allocations adopted and reported running ${Math.round(performance.now() - upgradedAt)} ms after the new agent was spawned`);
    expect(adopted.map((r) => r.cause)).toEqual(['adopted', 'adopted', 'adopted']);
    expect(new Set(adopted.map((r) => r.release_id))).toEqual(new Set([deploy.body.id]));
    // Each allocation reported on one of the containers that ran before.
    expect(adopted.map((r) => r.status!.containerId).sort()).toEqual([...starts.keys()].sort());

    // Give the scheduler and the agent's reconcile passes time to do something wrong, then read Docker itself.
    await sleep(1_500);
    const after = await containers(serviceId);
    expect(after.map((c) => c.Id).sort()).toEqual([...starts.keys()].sort());
    for (const c of after) {
      expect(c.State).toBe('running');
      expect(await startedAt(c.Id)).toBe(starts.get(c.Id));
    }
  }, 90_000);
});
