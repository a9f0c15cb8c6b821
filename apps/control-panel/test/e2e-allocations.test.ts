import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { dockerApi, ensureDocker, ensureWebImage, sleep, waitFor } from '@tether/testkit';
import { startAgentProcess, type AgentProcess } from './helpers/agent-process.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';

// Issue 36 end to end: a service's replicas spread over three real agents (one Docker engine, each agent its own
// node name and network), placed by the scheduler, sent as allocations, run and reported by the agents. What runs
// is read from Docker itself (the tether.node and tether.allocation labels), not from the panel's own answers.

const SCHEDULER_MS = 200;
const HEARTBEAT_MS = 300;
const AGENT_ENV = {
  TETHER_MIN_READY_MS: '300',
  TETHER_DRAIN_MS: '200',
  TETHER_STOP_TIMEOUT_MS: '2000',
  TETHER_START_TIMEOUT_MS: '10000',
  TETHER_IMAGE_PULL_TIMEOUT_MS: '3000',
};

const docker = await ensureDocker();

interface Listed {
  Id: string;
  State: string;
  Labels: Record<string, string>;
  NetworkSettings: { Networks: Record<string, { IPAddress: string }> };
}

describe.skipIf(!docker.available)('services across nodes: scheduler → allocations → three agents → Docker', () => {
  let panel: Panel;
  let image: string;
  let teamId: string;
  const agents: AgentProcess[] = [];
  const nodes: { id: string; name: string; token: string }[] = [];
  const tag = `alloc-${process.pid}`;

  beforeAll(async () => {
    image = await ensureWebImage();
    panel = await startPanel({
      env: {
        TETHER_ALLOCATIONS: 'on',
        TETHER_SCHEDULER_INTERVAL_MS: String(SCHEDULER_MS),
        TETHER_HEARTBEAT_INTERVAL_MS: String(HEARTBEAT_MS),
        TETHER_PING_INTERVAL_MS: '1000',
        TETHER_SESSION_IDLE_MS: '3000',
        TETHER_AGENT_IDLE_MS: '5000',
      },
    });
    const team = await panel.api('POST', '/v1/teams', { name: tag });
    expect(team.status).toBe(201);
    teamId = team.body.id;
    for (const i of [1, 2, 3]) await addNode(`${tag}-n${i}`);
  }, 60_000);
  afterEach(async (context) => {
    if (context.task.result?.state === 'fail') {
      for (const a of agents) console.error(`--- agent ${a.nodeName}:\n${a.process.output().slice(-4_000)}`);
      console.error(`--- panel warnings:\n${panel.recentLogs()}`);
    }
  });
  afterAll(async () => {
    const stopping = agents.splice(0);
    await Promise.all(stopping.map((a) => a.stop()));
    for (const a of stopping) await a.destroy();
    await panel?.close();
  });

  async function addNode(name: string) {
    const node = await panel.createNode(name);
    nodes.push(node);
    const agent = await startAgentProcess({ panelUrl: panel.url, token: node.token, nodeName: node.name, runtime: 'docker', env: AGENT_ENV });
    agents.push(agent);
    await waitFor(() => panel.app.agentSide.registry.get(node.id), { timeoutMs: 10_000, message: `session of ${name}` });
    return node;
  }

  async function containers(serviceId: string): Promise<Listed[]> {
    const filters = encodeURIComponent(JSON.stringify({ label: [`tether.service=${serviceId}`] }));
    return JSON.parse((await dockerApi('GET', `/containers/json?all=1&filters=${filters}`)).body) as Listed[];
  }
  const running = async (serviceId: string) => (await containers(serviceId)).filter((c) => c.State === 'running');
  const byNode = (list: Listed[]) => list.map((c) => c.Labels['tether.node']).sort();
  const address = (c: Listed) => Object.values(c.NetworkSettings.Networks)[0]!.IPAddress;

  async function answer(c: Listed): Promise<string | null> {
    try {
      const res = await fetch(`http://${address(c)}:8080/`, { signal: AbortSignal.timeout(1_000) });
      return res.ok ? (await res.text()).trim() : null;
    } catch {
      return null;
    }
  }

  async function deployment(id: string) {
    return (await panel.api('GET', `/v1/deployments/${id}`)).body as { status: string; reason: string | null };
  }
  async function settled(id: string, timeoutMs: number) {
    return waitFor(
      async () => {
        const d = await deployment(id);
        return ['running', 'failed'].includes(d.status) ? d : undefined;
      },
      { timeoutMs, intervalMs: 50, message: `deployment ${id} settled` },
    );
  }

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
    expect(await settled(firstRelease, 30_000)).toMatchObject({ status: 'running' });
    console.log(`replicas 3 across 3 nodes: deployment running ${Math.round(performance.now() - asked)} ms after the POST`);
    const list = await running(serviceId);
    expect(byNode(list)).toEqual(nodes.slice(0, 3).map((n) => n.name).sort());
    for (const c of list) {
      expect(c.Labels['tether.deployment']).toBe(firstRelease);
      expect(c.Labels['tether.allocation']).toMatch(/.+/);
      expect(await answer(c)).toBe('v1');
    }
  });

  it('replicas: 2 removes exactly one container and leaves the other two untouched', async () => {
    const before = await running(serviceId);
    expect((await panel.api('PATCH', `/v1/services/${serviceId}`, { replicas: 2 })).status).toBe(200);
    const after = await waitFor(
      async () => {
        const now = await containers(serviceId);
        return now.length === 2 ? now : undefined;
      },
      { timeoutMs: 10_000, intervalMs: 50, message: 'one container removed' },
    );
    expect(after.every((c) => c.State === 'running')).toBe(true);
    const kept = new Set(before.map((c) => c.Id));
    expect(after.every((c) => kept.has(c.Id))).toBe(true);
    // Several scheduler passes later nothing else has moved.
    await sleep(SCHEDULER_MS * 5);
    expect((await containers(serviceId)).map((c) => c.Id).sort()).toEqual(after.map((c) => c.Id).sort());
  });

  it('a fourth node moves nothing', async () => {
    const before = (await containers(serviceId)).map((c) => c.Id).sort();
    await addNode(`${tag}-n4`);
    await sleep(SCHEDULER_MS * 10);
    expect((await containers(serviceId)).map((c) => c.Id).sort()).toEqual(before);
  });

  it('a new release rolls out node by node with never fewer than 2 replicas answering; a release failing its health check ends failed and every replica stays on the old one', async () => {
    expect((await panel.api('PATCH', `/v1/services/${serviceId}`, { env: { MESSAGE: 'v2' } })).status).toBe(200);
    const deploy = await panel.api('POST', `/v1/services/${serviceId}/deployments`, {});
    expect(deploy.status).toBe(201);
    let fewest = Infinity;
    let probes = 0;
    let done = false;
    const settledRow = settled(deploy.body.id, 40_000).finally(() => (done = true));
    while (!done) {
      const answers = await Promise.all((await running(serviceId)).map(answer));
      fewest = Math.min(fewest, answers.filter((a) => a === 'v1' || a === 'v2').length);
      probes += 1;
    }
    expect(await settledRow).toMatchObject({ status: 'running' });
    console.log(`rollout across nodes: ${probes} probes, fewest replicas answering ${fewest}`);
    expect(fewest).toBeGreaterThanOrEqual(2);
    const list = await running(serviceId);
    expect(list).toHaveLength(2);
    for (const c of list) expect(await answer(c)).toBe('v2');

    const good = list.map((c) => c.Id).sort();
    expect((await panel.api('PATCH', `/v1/services/${serviceId}`, { env: { MESSAGE: 'v3' }, healthCheck: { path: '/missing', intervalSeconds: 1, unhealthyThreshold: 1, startPeriodSeconds: 0 } })).status).toBe(200);
    const bad = await panel.api('POST', `/v1/services/${serviceId}/deployments`, {});
    expect(bad.status).toBe(201);
    const failed = await settled(bad.body.id, 60_000);
    console.log(`failing release: ${failed.status}: ${failed.reason}`);
    expect(failed.status).toBe('failed');
    expect(failed.reason).toMatch(new RegExp(nodes.map((n) => n.name).join('|')));
    const after = await waitFor(
      async () => {
        const now = await containers(serviceId);
        return now.length === 2 ? now : undefined;
      },
      { timeoutMs: 10_000, intervalMs: 100, message: 'the failed release removed' },
    );
    expect(after.map((c) => c.Id).sort()).toEqual(good);
    for (const c of after) expect(await answer(c)).toBe('v2');
  });
});
