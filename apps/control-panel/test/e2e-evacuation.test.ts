import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { dockerApi, ensureDocker, ensureWebImage, sleep, waitFor } from '@tether/testkit';
import { startAgentProcess, type AgentProcess } from './helpers/agent-process.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';

// Issue 36 "Maintenance" end to end: three real agents, a service with 2 replicas on two of them; evacuating one
// node moves its replica to the third (the new one healthy before the old one drains) while every container's own
// address is probed: never fewer than 2 answer. Uncordon moves nothing back. What runs is read from Docker itself.

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

describe.skipIf(!docker.available)('evacuating a node: three agents → Docker', () => {
  let panel: Panel;
  let image: string;
  let teamId: string;
  const agents: AgentProcess[] = [];
  const nodes: { id: string; name: string; token: string }[] = [];
  const tag = `evac-${process.pid}`;

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

  it('evacuate n1: its replica moves to n3 with never fewer than 2 answering; the answer lists the move; uncordon moves nothing back', async () => {
    const res = await panel.api('POST', '/v1/services', { teamId, name: 'evac', image, env: { MESSAGE: 'v1' }, internalPort: 8080, replicas: 2, healthCheck: { path: '/index.html' } });
    expect(res.status).toBe(201);
    const serviceId = res.body.id as string;
    const deploy = await panel.api('POST', `/v1/services/${serviceId}/deployments`, {});
    expect(deploy.status).toBe(201);
    expect(await settled(deploy.body.id, 30_000)).toMatchObject({ status: 'running' });
    const before = await running(serviceId);
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
        const now = await containers(serviceId);
        return now.length === 2 && byNode(now).join() === [nodes[1]!.name, nodes[2]!.name].join() && now.every((c) => c.State === 'running') ? now : undefined;
      },
      { timeoutMs: 40_000, intervalMs: 100, message: 'the replica on n1 moved to n3' },
    ).finally(() => (done = true));
    while (!done) {
      const answers = await Promise.all((await running(serviceId)).map(answer));
      fewest = Math.min(fewest, answers.filter((a) => a === 'v1').length);
      probes += 1;
    }
    const after = await moved;
    console.log(`evacuation: moved in ${Math.round(performance.now() - asked)} ms, ${probes} probes, fewest replicas answering ${fewest}`);
    expect(fewest).toBeGreaterThanOrEqual(2);
    // The replica on n2 never restarted.
    expect(after.map((c) => c.Id)).toContain(kept.Id);
    for (const c of after) expect(await answer(c)).toBe('v1');

    const uncordoned = await panel.api('POST', `/v1/nodes/${nodes[0]!.id}/uncordon`, {});
    expect(uncordoned.status).toBe(200);
    expect(uncordoned.body).toMatchObject({ cordoned: false, evacuating: false });
    await sleep(SCHEDULER_MS * 10);
    expect((await containers(serviceId)).map((c) => c.Id).sort()).toEqual(after.map((c) => c.Id).sort());
    const audit = await panel.api('GET', `/v1/audit?action=node.evacuate`);
    if (audit.status === 200) expect(JSON.stringify(audit.body)).toContain(nodes[0]!.id);
  }, 90_000);
});
