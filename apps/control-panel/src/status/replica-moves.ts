import type { AllocationInput, ReplicaMove } from './status-types.js';

// How a service's status says what failover did (issue 38): a replica placed in place of a lost node's carries the
// facts the scheduler recorded then (allocations.moved_from, cluster/failover-record.ts), read back here as one
// line, "moved from node-a (unreachable since …, torn down for …) to node-c at …". The row lives as long as the
// replica does; the audit's `service.failover` rows (actor `scheduler`) are the lasting history.

interface Stored {
  nodeId?: unknown;
  nodeName?: unknown;
  unreachableSince?: unknown;
  teardownReason?: unknown;
}

const text = (v: unknown): string | null => (typeof v === 'string' && v.length > 0 ? v : null);

/** The allocation's move, or null when failover did not place it (or the row was read without its facts). */
export function replicaMove(a: Pick<AllocationInput, 'movedFrom' | 'createdAt' | 'node'>): ReplicaMove | null {
  const stored = a.movedFrom as Stored | null | undefined;
  if (!stored || typeof stored !== 'object' || !a.createdAt) return null;
  const name = text(stored.nodeName) ?? text(stored.nodeId) ?? 'a lost node';
  const since = text(stored.unreachableSince);
  const reason = text(stored.teardownReason);
  const at = a.createdAt.toISOString();
  const why = [since ? `unreachable since ${since}` : 'unreachable', reason ? `torn down for ${reason}` : null].filter(Boolean).join(', ');
  return {
    node: { id: text(stored.nodeId) ?? '', name },
    unreachableSince: since,
    teardownReason: reason,
    at,
    message: `moved from ${name} (${why}) to ${a.node.name} at ${at}`,
  };
}
