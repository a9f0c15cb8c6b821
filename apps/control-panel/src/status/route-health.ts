import type { RouteCertificate, RouteProbe, RoutingStatus } from '@tether/protocol';
import { clusterProof, nodeHealth, type ClusterProof } from '../node-health/node-health.js';
import type { SessionRegistry } from '../sessions/registry.js';
import type { ClusterView } from '../sessions/remote-report.js';

// A route's health: a presenter of its node's health (which live session, if
// any, proves the node) and of the last probe that session's agent made of the
// route through its own proxy (capability `routes.probe`). `serving` or
// `failing` only from a live session's probe no older than two of its
// intervals; otherwise `unknown`, with the reason, never an old verdict.

export type RouteHealthState = 'serving' | 'failing' | 'unknown';

export interface RouteHealth {
  state: RouteHealthState;
  reason: string;
  /** The probe the state is read from, and the session that carried it; null when unknown. */
  evidence: (Omit<RouteProbe, 'certificate'> & { sessionId: string }) | null;
}

/** The certificate of a route's domain as the live session's last probe of the route saw it; null until one was. */
export function routeCertificate(route: { domain: string; pathPrefix: string | null }, live: LiveRouting): RouteCertificate | null {
  if ('why' in live) return null;
  return live.routing?.probes?.find((p) => p.domain === route.domain && p.pathPrefix === route.pathPrefix)?.certificate ?? null;
}

/** The routing status a live session last carried for a node, or why there is none. */
export type LiveRouting = { sessionId: string; routing: RoutingStatus | null } | { why: string };

export interface RouteNode {
  id: string;
  name: string;
}

export function liveRoutingOf(node: RouteNode, registry: Pick<SessionRegistry, 'get' | 'lastTeardown'>, cluster?: ClusterView | ClusterProof): LiveRouting {
  const proof: ClusterProof | undefined = cluster && ('elsewhere' in cluster ? cluster : clusterProof(cluster));
  const facts = { id: node.id, name: node.name, decommissioned: false, lastSeenAt: null, unreachableSince: null, lastTeardownAt: null, lastTeardownReason: null, lastCloseCode: null };
  const health = nodeHealth(facts, { registry, ...(proof ? { cluster: proof } : {}) });
  if (health.remote) return { sessionId: health.remote.sessionId, routing: health.remote.routing };
  if (health.local?.report) return { sessionId: health.local.id, routing: health.local.report.routing };
  if (health.leaseLost) return { why: `this panel does not hold its lease on the database: node ${node.name} cannot be proved from here` };
  return { why: `node ${node.name} has no live session` };
}

export function routeHealth(route: { domain: string; pathPrefix: string | null }, live: LiveRouting, now = Date.now()): RouteHealth {
  if ('why' in live) return { state: 'unknown', reason: live.why, evidence: null };
  const probes = live.routing?.probes;
  const intervalMs = live.routing?.probeIntervalMs;
  if (!probes || !intervalMs) return { state: 'unknown', reason: 'the agent of this node does not probe routes (capability routes.probe, or probes off)', evidence: null };
  const probe = probes.find((p) => p.domain === route.domain && p.pathPrefix === route.pathPrefix);
  if (!probe) return { state: 'unknown', reason: 'not probed yet by the agent of this node', evidence: null };
  // Measured from the probe's end: the agent's next probe is due an interval after the previous one ended. From its
  // start, the wait of a slow answer (a route with no upstream waits out the proxy's 700 ms retry window) counted
  // against the bound twice, and with a 1 s interval a failing route read unknown for part of every cycle.
  const age = now - (Date.parse(probe.at) + probe.latencyMs);
  if (!(age <= 2 * intervalMs)) {
    return { state: 'unknown', reason: `the last probe (${probe.at}, ${probe.latencyMs} ms) ended more than two probe intervals (${2 * intervalMs} ms) ago`, evidence: null };
  }
  const { certificate: _certificate, ...seen } = probe;
  const evidence = { ...seen, sessionId: live.sessionId };
  // Deliberately not probed (TLS with the ACME issuer, DNS not pointing at the host): no verdict, the agent's why.
  if (probe.notProbed) return { state: 'unknown', reason: `${probe.notProbed.reason}: ${probe.error ?? 'not probed'}`, evidence };
  if (probe.state === 'serving') return { state: 'serving', reason: `the app answered ${probe.status} in ${probe.latencyMs} ms`, evidence };
  const what =
    probe.status === null
      ? `no answer (${probe.error ?? 'no detail'})`
      : `${probe.madeBy === 'proxy' ? 'the proxy' : 'the app'} answered ${probe.status}`;
  return { state: 'failing', reason: `${what} after ${probe.latencyMs} ms`, evidence };
}

/** Every route probe of these sessions that still says something (for /metrics): fresh ones only. */
export function* freshRouteProbes(
  sessions: Iterable<{ id: string; nodeName: string; report: { routing: RoutingStatus } | null }>,
  now = Date.now(),
): Iterable<{ node: string; domain: string; pathPrefix: string | null; up: boolean; latencyMs: number; certificate: RouteCertificate | null }> {
  for (const session of sessions) {
    const routing = session.report?.routing;
    for (const probe of routing?.probes ?? []) {
      const health = routeHealth(probe, { sessionId: session.id, routing: routing ?? null }, now);
      if (health.state === 'unknown') continue;
      yield { node: session.nodeName, domain: probe.domain, pathPrefix: probe.pathPrefix, up: health.state === 'serving', latencyMs: probe.latencyMs, certificate: probe.certificate ?? null };
    }
  }
}
