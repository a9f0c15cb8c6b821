import { expect } from 'vitest';
import { dockerApi, ensureWebImage, waitFor } from '@tether/testkit';
import { startAgentProcess, type AgentProcess } from './agent-process.js';
import { startPanel, type Panel } from './panel-harness.js';

// Several real agents (one Docker engine, each agent its own node name and network) on one panel that places
// services across them (TETHER_ALLOCATIONS=on): the services-across-nodes suites (e2e-allocations,
// e2e-evacuation, e2e-failover). What runs is read from Docker itself (the tether.node and tether.allocation
// labels), not from the panel's answers.

export const FLEET_SCHEDULER_MS = 200;
const HEARTBEAT_MS = 300;
export const AGENT_ENV = {
  TETHER_MIN_READY_MS: '300',
  TETHER_DRAIN_MS: '200',
  TETHER_STOP_TIMEOUT_MS: '2000',
  TETHER_START_TIMEOUT_MS: '10000',
  TETHER_IMAGE_PULL_TIMEOUT_MS: '3000',
};

/** A container as Docker lists it. */
export interface Listed {
  Id: string;
  State: string;
  Labels: Record<string, string>;
  NetworkSettings: { Networks: Record<string, { IPAddress: string }> };
}

export interface Fleet {
  panel: Panel;
  /** The web test image (answers MESSAGE on GET / at port 8080). */
  image: string;
  teamId: string;
  agents: AgentProcess[];
  nodes: { id: string; name: string; token: string }[];
  addNode(name: string): Promise<{ id: string; name: string; token: string }>;
  /** Every container of the service, whatever its state. */
  containers(serviceId: string): Promise<Listed[]>;
  running(serviceId: string): Promise<Listed[]>;
  /** GET / on the container's own address: its body, or null when it does not answer 200 within 1 s. */
  answer(c: Listed): Promise<string | null>;
  /** Polls the deployment until it is running or failed. */
  settled(id: string, timeoutMs: number): Promise<{ status: string; reason: string | null }>;
  /** For afterEach: on a failed case, what the agents and the panel said. */
  explain(context: { task: { result?: { state?: string } } }): void;
  /** Thaws any frozen agent, stops and removes every agent's containers, closes the panel. */
  close(): Promise<void>;
}

/** The node names of the listed containers, sorted. */
export const byNode = (list: Listed[]): string[] => list.map((c) => c.Labels['tether.node']!).sort();

export async function startFleet(options: { tag: string; nodes: number; panelEnv?: Record<string, string>; agentEnv?: Record<string, string> }): Promise<Fleet> {
  const image = await ensureWebImage();
  const panel = await startPanel({
    env: {
      TETHER_ALLOCATIONS: 'on',
      TETHER_SCHEDULER_INTERVAL_MS: String(FLEET_SCHEDULER_MS),
      TETHER_HEARTBEAT_INTERVAL_MS: String(HEARTBEAT_MS),
      TETHER_PING_INTERVAL_MS: '1000',
      TETHER_SESSION_IDLE_MS: '3000',
      TETHER_AGENT_IDLE_MS: '5000',
      ...options.panelEnv,
    },
  });
  const team = await panel.api('POST', '/v1/teams', { name: options.tag });
  expect(team.status).toBe(201);
  const agents: AgentProcess[] = [];
  const nodes: Fleet['nodes'] = [];

  const addNode = async (name: string) => {
    const node = await panel.createNode(name);
    nodes.push(node);
    agents.push(await startAgentProcess({ panelUrl: panel.url, token: node.token, nodeName: node.name, runtime: 'docker', env: { ...AGENT_ENV, ...options.agentEnv } }));
    await waitFor(() => panel.app.agentSide.registry.get(node.id), { timeoutMs: 10_000, message: `session of ${name}` });
    // The open, with the capabilities the scheduler places by, written: before it the node reads as not speaking
    // allocations (an evacuation answer once named another node than the idle third one for that reason).
    await panel.settled();
    return node;
  };
  const containers = async (serviceId: string) => {
    const filters = encodeURIComponent(JSON.stringify({ label: [`tether.service=${serviceId}`] }));
    return JSON.parse((await dockerApi('GET', `/containers/json?all=1&filters=${filters}`)).body) as Listed[];
  };
  const fleet: Fleet = {
    panel,
    image,
    teamId: team.body.id as string,
    agents,
    nodes,
    addNode,
    containers,
    running: async (serviceId) => (await containers(serviceId)).filter((c) => c.State === 'running'),
    async answer(c) {
      // A container listed running while it is being stopped may have left its network already: it answers nothing.
      const address = Object.values(c.NetworkSettings.Networks ?? {})[0]?.IPAddress;
      if (!address) return null;
      // A refusal, a reset or a non-200 is an answer of "not serving"; a probe that only ran out of time on a loaded
      // machine says nothing either way, so it is asked again (three times in all) before it counts as silence.
      for (let attempt = 1; ; attempt += 1) {
        try {
          const res = await fetch(`http://${address}:8080/`, { signal: AbortSignal.timeout(1_000) });
          return res.ok ? (await res.text()).trim() : null;
        } catch (err) {
          if ((err as Error).name !== 'TimeoutError' || attempt === 3) return null;
        }
      }
    },
    settled: (id, timeoutMs) =>
      waitFor(
        async () => {
          const d = (await panel.api('GET', `/v1/deployments/${id}`)).body as { status: string; reason: string | null };
          return ['running', 'failed'].includes(d.status) ? d : undefined;
        },
        { timeoutMs, intervalMs: 50, message: `deployment ${id} settled` },
      ),
    explain(context) {
      if (context.task.result?.state !== 'fail') return;
      for (const a of agents) console.error(`--- agent ${a.nodeName}:\n${a.process.output().slice(-4_000)}`);
      console.error(`--- panel warnings:\n${panel.recentLogs()}`);
    },
    async close() {
      for (const a of agents) {
        try {
          process.kill(a.process.pid!, 'SIGCONT');
        } catch {
          // already gone
        }
      }
      const stopping = agents.splice(0);
      await Promise.all(stopping.map((a) => a.stop()));
      for (const a of stopping) await a.destroy();
      await panel.close();
    },
  };
  for (let i = 1; i <= options.nodes; i++) await addNode(`${options.tag}-n${i}`);
  return fleet;
}
