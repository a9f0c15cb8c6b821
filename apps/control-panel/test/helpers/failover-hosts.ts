import { readFileSync } from 'node:fs';
import path from 'node:path';
import { dockerApi } from '@tether/testkit';
import type { NodeOnHost } from './host-agents.js';

// What the failover suite (e2e-failover-cut.test.ts) reads from the hosts themselves: a service's containers on one host's own Docker engine, and the targets the
// host's answerer names for a domain (the zone file its agent writes, TETHER_STATE_DIR/answerer/zones). A copy
// "serves" while it runs and its own node's answers name it: Caddy picks upstreams from those answers only.

export interface Copy {
  node: string;
  id: string;
  state: string;
  startedAt: string;
  /** Its node's answers name it (an SRV target c-<id12>, of any domain). */
  inAnswers: boolean;
}

const socketOf = (n: NodeOnHost) => n.host.daemon!.dockerHost.replace(/^unix:\/\//, '');

/** The container ids (12 characters) the node's answerer names as SRV targets now, of `domain`'s records or of all. */
export function zoneTargets(n: NodeOnHost, domain?: string): string[] {
  let text = '';
  try {
    text = readFileSync(path.join(n.stateDir, 'answerer', 'zones', 'rt.tether.internal.zone'), 'utf8');
  } catch {
    return [];
  }
  const out: string[] = [];
  for (const line of text.split('\n')) {
    if (domain !== undefined && !line.startsWith(`${domain}.`)) continue;
    const m = / SRV \d+ \d+ \d+ c-([0-9a-f]{12})\./.exec(line);
    if (m) out.push(m[1]!);
  }
  return out;
}

/**
 * The service's containers on the node's engine (any state), with whether its answers name them; with `started`,
 * each one's start time too (one inspect per container; without it, startedAt is empty and the read is one call).
 */
export async function copiesOn(n: NodeOnHost, serviceId: string, options: { started?: boolean } = {}): Promise<Copy[]> {
  const filters = encodeURIComponent(JSON.stringify({ label: [`tether.service=${serviceId}`] }));
  const res = await dockerApi('GET', `/containers/json?all=1&filters=${filters}`, undefined, undefined, socketOf(n));
  if (res.status !== 200) throw new Error(`docker ps on ${n.name}: ${res.status} ${res.body}`);
  const listed = JSON.parse(res.body) as { Id: string; State: string }[];
  const targets = new Set(zoneTargets(n));
  const out: Copy[] = [];
  for (const c of listed) {
    let startedAt = '';
    if (options.started) {
      const inspect = await dockerApi('GET', `/containers/${c.Id}/json`, undefined, undefined, socketOf(n));
      // Removed between the list and the inspect: gone.
      if (inspect.status !== 200) continue;
      startedAt = (JSON.parse(inspect.body) as { State: { StartedAt: string } }).State.StartedAt;
    }
    out.push({ node: n.name, id: c.Id, state: c.State, startedAt, inAnswers: targets.has(c.Id.slice(0, 12)) });
  }
  return out;
}

/** The copies that serve: running, and named by their own node's answers; by node. */
export function servingCopies(copies: readonly Copy[]): Copy[] {
  return copies.filter((c) => c.state === 'running' && c.inAnswers).sort((a, b) => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0));
}
