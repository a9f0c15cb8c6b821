import { pendingOf, type PendingReplicas } from '../db/json-columns.js';
import type { PendingChange, PlaceChange, Placement } from './types.js';

// Capacity honest (issue 36). A service made while no node was eligible has
// no home node (services.node_id null) and every replica pending; the
// scheduler places it like any managed service (its own placement: with no
// home, neither a route nor a volume pins it anywhere yet) and, in the
// evaluation that places its first replica, makes that replica's node its
// home, so moves, leaveVolumes, volumes and routes work on it as on any other
// service from then on. Why replicas wait is written on the service
// (services.pending) whenever it changes, so every panel's status reads it.

/** A service without a home gets the node of its first placed replica. */
export interface HomeWrite {
  serviceId: string;
  nodeId: string;
}

/** services.pending as it must be now (null: nothing waits). */
export interface PendingWrite {
  serviceId: string;
  pending: PendingReplicas | null;
}

/** The homes of services without one that this evaluation places replicas of: the first placed replica's node. */
export function homesOf(services: readonly { id: string; homeNodeId: string | null }[], places: readonly Pick<PlaceChange, 'serviceId' | 'nodeId'>[]): HomeWrite[] {
  const homeless = new Set(services.filter((s) => s.homeNodeId === null).map((s) => s.id));
  const homes = new Map<string, string>();
  for (const place of places) if (homeless.has(place.serviceId) && !homes.has(place.serviceId)) homes.set(place.serviceId, place.nodeId);
  return [...homes].map(([serviceId, nodeId]) => ({ serviceId, nodeId }));
}

/** Why replicas wait, in words a customer can act on. */
export function pendingMessage(reason: PendingChange['reason'], placement: Placement): string {
  const among = placement.nodes && placement.nodes.length > 0 ? ` among ${placement.nodes.join(', ')}` : '';
  if (reason === 'NO_NODE_MATCHES_LABELS') {
    const labels = Object.entries(placement.labels ?? {}).map(([k, v]) => `${k}=${v}`).join(', ');
    return `no live node that takes new replicas${among} carries ${labels}: label one (PATCH /v1/nodes/:id, operators) or change the placement`;
  }
  return `no live node${among} takes new replicas (uncordoned, its agent speaking workload.allocations): register or uncordon one (operators)`;
}

/**
 * The services.pending writes of this evaluation: each scheduled service whose waiting replicas (count, reason)
 * differ from what its row holds. Only changes are written, so a steady fleet writes nothing.
 */
export function pendingWrites(
  services: readonly { id: string; pending?: unknown }[],
  placements: ReadonlyMap<string, Placement>,
  pending: readonly PendingChange[],
): PendingWrite[] {
  const now = new Map<string, PendingReplicas>();
  for (const change of pending) {
    const before = now.get(change.serviceId);
    if (before) before.count += change.count;
    else now.set(change.serviceId, { count: change.count, code: change.reason, message: pendingMessage(change.reason, placements.get(change.serviceId) ?? {}) });
  }
  const out: PendingWrite[] = [];
  for (const service of services) {
    const stored = pendingOf(service.pending);
    const want = now.get(service.id) ?? null;
    const same = want === null ? stored === null || stored.count === 0 : stored !== null && stored.count === want.count && stored.code === want.code && stored.message === want.message;
    if (!same) out.push({ serviceId: service.id, pending: want });
  }
  return out;
}
