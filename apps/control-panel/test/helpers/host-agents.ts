import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { createHostNetwork, hostAgentEnv, waitFor, type Host, type HostNetwork, type ManagedProcess, type NetnsClient } from '@tether/testkit';
import { ensureEchoImage } from './echo-image.js';
import { startPanel, type Panel } from './panel-harness.js';

// Real agents on the hosts of testkit's createHostNetwork (the cross-node
// suites): a node registered per host (x1, x2, …), its agent from
// apps/host-agent/dist started inside the host's namespace with the
// environment the suite gives, and a wait until every session speaks the
// capability the suite is about (with each agent's output when it does not);
// startHostFleet, the whole start the routing and failover suites share.

const agentMain = createRequire(import.meta.url).resolve('@tether/host-agent/dist/main.js');

export interface NodeOnHost {
  host: Host;
  id: string;
  name: string;
  agent: ManagedProcess;
  stateDir: string;
}

export interface HostAgentsOptions {
  tag: string;
  /** The environment of the agent on `host` (testkit's hostAgentEnv, with the suite's settings). */
  env: (host: Host, node: { name: string; token: string }, stateDir: string) => NodeJS.ProcessEnv;
  /** Every session must have agreed this capability before the suite goes on. */
  capability: string;
}

export async function startHostAgents(panel: Panel, net: HostNetwork, options: HostAgentsOptions): Promise<NodeOnHost[]> {
  const nodes: NodeOnHost[] = [];
  for (const [i, host] of net.hosts.entries()) {
    const name = `x${i + 1}`;
    const node = await panel.createNode(name);
    const stateDir = mkdtempSync(path.join(os.tmpdir(), `tether-${options.tag}-${name}-`));
    const agent = net.spawnIn(host, process.execPath, [agentMain], { env: options.env(host, { name, token: node.token }, stateDir) });
    nodes.push({ host, id: node.id, name, agent, stateDir });
  }
  await waitFor(() => nodes.every((n) => panel.app.agentSide.registry.get(n.id)?.hasCapability(options.capability)), {
    timeoutMs: 60_000,
    message: `${nodes.length} sessions speaking ${options.capability}`,
  }).catch((err: Error) => {
    throw new Error(`${err.message}\n${explain(nodes, 3_000)}`);
  });
  return nodes;
}

/** Each agent's last output, for a failed case. */
export function explain(nodes: readonly NodeOnHost[], chars = 4_000): string {
  return nodes.map((n) => `--- agent ${n.name}:\n${n.agent.output().slice(-chars)}`).join('\n');
}

export async function stopHostAgents(nodes: readonly NodeOnHost[]): Promise<void> {
  for (const n of nodes) await n.agent.stop().catch(() => undefined);
  for (const n of nodes) rmSync(n.stateDir, { recursive: true, force: true });
}

/** A panel (in this process), hosts with their own engines holding the echo image, an agent on each, a visitor in the hub. */
export interface HostFleet {
  net: HostNetwork;
  panel: Panel;
  visitor: NetnsClient;
  nodes: NodeOnHost[];
  image: string;
  /** For afterEach: each agent's output and the panel's warnings when the case failed. */
  explainFailure(context: { task: { result?: { state?: string } } }): void;
  close(): Promise<void>;
}

export interface HostFleetOptions {
  tag: string;
  hosts: number;
  panelEnv: Record<string, string>;
  /** Caddy's SRV refresh and the agent's probe of remote endpoints (ms). */
  lookupRefreshMs: number;
  remoteProbeMs: number;
  agentExtra?: Record<string, string>;
}

/** What every suite on these hosts sets (its panelEnv adds and overrides): a scheduler and a map push that keep up with short deadlines. */
const FLEET_PANEL_ENV = { TETHER_ALLOCATIONS: 'on', TETHER_SCHEDULER_INTERVAL_MS: '200', TETHER_PING_INTERVAL_MS: '500', TETHER_ROUTING_DEBOUNCE_MS: '100' };

/** The start the cross-node suites share: every agent speaking routing.remote before it resolves. */
export async function startHostFleet(o: HostFleetOptions): Promise<HostFleet> {
  const net = await createHostNetwork({ tag: o.tag, hosts: o.hosts });
  let panel: Panel | undefined;
  let nodes: NodeOnHost[];
  let visitor: NetnsClient;
  let image: string;
  try {
    image = await ensureEchoImage();
    await net.startDaemons([image]);
    panel = await startPanel({ env: { ...FLEET_PANEL_ENV, ...o.panelEnv } });
    const panelUrl = await net.exposePanel(panel.port);
    visitor = await net.client(net.hub.netns);
    nodes = await startHostAgents(panel, net, {
      tag: o.tag,
      capability: 'routing.remote',
      env: (host, node, stateDir) =>
        hostAgentEnv(host, { panelUrl, token: node.token, nodeName: node.name, stateDir, lookupRefreshMs: o.lookupRefreshMs, remoteProbeMs: o.remoteProbeMs, ...(o.agentExtra ? { extra: o.agentExtra } : {}) }),
    });
  } catch (err) {
    // The agents started are the network's children: destroying it stops them.
    await net.destroy();
    await panel?.close();
    throw err;
  }
  return {
    net,
    panel: panel!,
    visitor,
    nodes,
    image,
    explainFailure(context) {
      if (context.task.result?.state !== 'fail') return;
      console.error(explain(nodes));
      console.error(`--- panel warnings:\n${panel!.recentLogs()}`);
    },
    async close() {
      await visitor.close();
      await stopHostAgents(nodes);
      await net.destroy();
      await panel!.close();
    },
  };
}
