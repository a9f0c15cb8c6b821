// Readers of jsonb columns whose shape the database does not enforce: what is
// not of the shape reads as empty rather than reaching a presenter as is.

/** An object of strings (node labels, a placement's labels); other entries and other values read as none. */
export function stringRecordOf(value: unknown): Record<string, string> {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return {};
  return Object.fromEntries(Object.entries(value).filter((e): e is [string, string] => typeof e[1] === 'string'));
}

/** services.pending: replicas the scheduler could not place and why (issue 36). */
export interface PendingReplicas {
  count: number;
  /** NO_NODE_AVAILABLE or NO_NODE_MATCHES_LABELS. */
  code: string;
  message: string;
}

/** services.pending as stored ({ count, code, message }); anything else reads as none. */
export function pendingOf(value: unknown): PendingReplicas | null {
  if (!value || typeof value !== 'object' || Array.isArray(value)) return null;
  const { count, code, message } = value as { count?: unknown; code?: unknown; message?: unknown };
  if (typeof code !== 'string') return null;
  return { count: typeof count === 'number' ? count : 0, code, message: typeof message === 'string' ? message : '' };
}

/**
 * A service's replicas that wait for a node, or null. Without a home every wanted replica waits (the reason the
 * creation or the scheduler last recorded); with one, those the scheduler last found it could not place.
 */
export function waitingReplicas(service: { nodeId: string | null; replicas: number; pending: unknown }): PendingReplicas | null {
  const stored = pendingOf(service.pending);
  if (service.nodeId === null) {
    if (service.replicas === 0) return null;
    return { count: service.replicas, code: stored?.code ?? 'NO_NODE_AVAILABLE', message: stored?.message ?? 'waiting for the scheduler to place them' };
  }
  return stored && stored.count > 0 ? stored : null;
}
