import type { RouteCertificate } from '@tether/protocol';
import { routeCertificate, routeHealth, type LiveRouting, type RouteHealth, type RouteNode } from './route-health.js';
import type { ServingNodeRow } from '../routing/serving-nodes.js';

// A route's health across the nodes serving it (issue 37): each serving node's
// own verdict (its agent probes the route through its own proxy), and the
// route's: `serving` while any node serves it, else `failing` when one's probe
// failed, else `unknown`. With no serving node (a service not yet deployed),
// the verdict is its home node's, as before cross-node routing; `unknown`
// for a service without a home (its replicas pending: it runs nowhere).

export interface ServedBy {
  node: RouteNode;
  /** Its address on the operators' private network, as its agent announced it (null: none announced). */
  privateAddress: string | null;
  /** Why it serves the route: a replica runs there, it is an entry point (ingress label), or it is the service's one node. */
  role: ServingNodeRow['role'];
  health: RouteHealth;
  certificate: RouteCertificate | null;
}

export interface RouteServing {
  health: RouteHealth;
  certificate: RouteCertificate | null;
  servedBy: ServedBy[];
}

export function routeServing(
  route: { domain: string; pathPrefix: string | null },
  home: RouteNode | null,
  serving: readonly ServingNodeRow[],
  live: (node: RouteNode) => LiveRouting,
  now = Date.now(),
): RouteServing {
  const servedBy = serving.map((s): ServedBy => {
    const node = { id: s.node_id, name: s.node_name };
    const nodeLive = live(node);
    return { node, privateAddress: s.private_address, role: s.role, health: routeHealth(route, nodeLive, now), certificate: routeCertificate(route, nodeLive) };
  });
  if (servedBy.length === 0 && home === null) return { health: { state: 'unknown', reason: 'the service has no node yet: its replicas are pending', evidence: null }, certificate: null, servedBy };
  if (servedBy.length === 0 && home !== null) {
    const homeLive = live(home);
    return { health: routeHealth(route, homeLive, now), certificate: routeCertificate(route, homeLive), servedBy };
  }
  const chosen = servedBy.find((s) => s.health.state === 'serving') ?? servedBy.find((s) => s.health.state === 'failing');
  if (chosen) {
    const where = servedBy.length > 1 ? ` (node ${chosen.node.name}; ${servedBy.filter((s) => s.health.state === 'serving').length} of ${servedBy.length} nodes serving)` : '';
    return { health: { ...chosen.health, reason: `${chosen.health.reason}${where}` }, certificate: chosen.certificate, servedBy };
  }
  const first = servedBy[0]!;
  // One node: its verdict as it is (a route not probed on purpose keeps its evidence and certificate's reason).
  if (servedBy.length === 1) return { health: first.health, certificate: first.certificate, servedBy };
  const reason = `no serving node proves it: ${servedBy.map((s) => `${s.node.name}: ${s.health.reason}`).join('; ')}`;
  const evidence = servedBy.find((s) => s.health.evidence)?.health.evidence ?? null;
  return { health: { state: 'unknown', reason, evidence }, certificate: servedBy.find((s) => s.certificate)?.certificate ?? null, servedBy };
}
