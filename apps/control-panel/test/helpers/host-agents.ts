import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { waitFor, type Host, type HostNetwork, type ManagedProcess } from '@tether/testkit';
import type { Panel } from './panel-harness.js';

// Real agents on the hosts of testkit's createHostNetwork (the cross-node
// suites): a node registered per host (x1, x2, …), its agent from
// apps/host-agent/dist started inside the host's namespace with the
// environment the suite gives, and a wait until every session speaks the
// capability the suite is about (with each agent's output when it does not).

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
