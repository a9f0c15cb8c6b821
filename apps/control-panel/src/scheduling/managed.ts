import { stringRecordOf } from '../db/json-columns.js';
import { ALLOCATIONS_CAPABILITY } from '../db/where-services-run.js';
import type { NodeView, Placement } from './types.js';

// Which services the scheduler places (issue 36): *managed by allocations* is
// defined once, in db/where-services-run.ts (with its SQL form and where a
// service runs), for every folder that reads it. A service without a home
// node (no node was eligible when it was made) is managed; so is one whose
// home node (Service.nodeId) announced `workload.allocations` at its last
// session open (nodes.capabilities). Unmanaged services keep the path of
// today: deploy frames and the workloads set, on Service.nodeId alone; the
// scheduler neither reads nor writes their allocations. A managed service's
// replicas go only to nodes that speak allocations too; a routed service whose
// home node's agent does not speak cross-node routing (routing.remote) stays
// on its home node, where its domains are served; a service with a writable
// volume stays with its data there; a placement that names nodes keeps it
// there.

export { ALLOCATIONS_CAPABILITY, managedByAllocations, managedSql } from '../db/where-services-run.js';

/**
 * A node (its row under the alias `n`) live on another panel: the report row of the session its owner holds now
 * (same generation), connected, written by a panel whose lease is live by PostgreSQL's clock (as
 * cluster/node-reports.ts reads liveness). The scheduler's reads and a lost node's new home (domain/node-lost.ts).
 */
export const LIVE_ELSEWHERE = `EXISTS (
  SELECT 1 FROM node_reports r JOIN node_owners w ON w.node_id = r.node_id AND w.generation = r.generation
    JOIN panels p ON p.id = r.panel_id
  WHERE r.node_id = n.id AND r.state = 'connected' AND p.lease_until > now())`;

/** A node takes new replicas of managed services only when its agent speaks allocations. */
export function takesAllocations(node: { capabilities: readonly string[] }): boolean {
  return node.capabilities.includes(ALLOCATIONS_CAPABILITY);
}

export interface ManagedServiceFacts {
  /** Its home node's name; null: none yet (its first placed replica's node becomes its home). */
  homeName: string | null;
  /** The placement column as stored. */
  placement: unknown;
  /** The service has routes and its home node's agent does not speak routing.remote: its replicas stay on its home node. */
  routed: boolean;
  /** A writable volume: its data is on the home node (volumes and leaveVolumes name it), so the replica stays there. */
  stateful?: boolean;
}

/**
 * Where the scheduler may put the service's replicas: its own placement, or its home node alone when routed
 * or when a writable volume pins it.
 */
export function effectivePlacement(service: ManagedServiceFacts): Placement {
  if ((service.routed || service.stateful) && service.homeName !== null) return { nodes: [service.homeName] };
  const value = service.placement;
  if (!value || typeof value !== 'object' || Array.isArray(value)) return {};
  // Read as domain/placement.ts reads the column (not imported: domain/ imports this folder).
  const { nodes, labels } = value as { nodes?: unknown; labels?: unknown };
  return { nodes: Array.isArray(nodes) ? nodes.filter((n): n is string => typeof n === 'string') : [], labels: stringRecordOf(labels) };
}

export interface NodeFacts {
  id: string;
  name: string;
  /** A session carried traffic within the deadline, on some panel. */
  live: boolean;
  cordoned: boolean;
  decommissioned: boolean;
  labels: Readonly<Record<string, string>>;
  capabilities: readonly string[];
  /** Being evacuated (POST /v1/nodes/:id/evacuate; cordoned too). */
  evacuating?: boolean;
  /** An operator declared its host gone (POST /v1/nodes/:id/lost; decommissioned too). */
  lost?: boolean;
  /**
   * Not live: since when it has had no live session anywhere (epoch ms), its recorded teardown or its owner
   * panel's lease expiry, whichever is later; null when neither is known (failover-policy.ts: downSince).
   */
  downSince?: number | null;
  /** hello.fence of its last session open (workload.fence): how long its agent waits before it fences; null: it does not. */
  fence?: { afterMs: number; stopTimeoutMs: number } | null;
}

/**
 * The scheduler's view of a node. Not live: `unreachable` (it keeps its allocations; failover, not wired yet,
 * decides when it is lost). A node whose agent does not speak allocations is not eligible: it keeps what it has
 * and gets nothing new, as a cordoned node does.
 */
export function nodeViewOf(node: NodeFacts): NodeView {
  return {
    id: node.id,
    name: node.name,
    state: node.live ? 'live' : 'unreachable',
    cordoned: node.cordoned || !takesAllocations(node),
    decommissioned: node.decommissioned,
    labels: node.labels,
    ...(node.evacuating ? { evacuating: true } : {}),
  };
}
