import { expect } from 'vitest';
import type { PanelConfig } from '../../src/config.js';

// What POST /v1/services/:id/deployments answers (docs/api.md "Deployments"), in the panel's mode. With
// TETHER_ALLOCATIONS=on a real agent announces workload.allocations, so its services are managed by
// allocations: the deployment is handed to the scheduler (201, pending, dispatchedAt set, no session: no
// deploy frame is sent), which rolls it out and ends it running or failed. Otherwise the single-node path:
// 202 once the node's agent acknowledged the deploy frame (delivered, on its session).

/** True when the panel confirms workload.allocations: a real agent's services are managed by allocations. */
export const allocationsOn = (panel: { config: PanelConfig }): boolean => panel.config.scheduler.allocations;

export const HANDED_TO_SCHEDULER = 'handed to the scheduler: it rolls the release out across nodes';

/** Asserts the answer to a deploy of a service on a node whose agent is connected on `sessionId` (when known). */
export function expectDeployAccepted(
  panel: { config: PanelConfig },
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- tests read answers ad hoc
  res: { status: number; body: any },
  expected: { serviceId?: string; sessionId?: string } = {},
): void {
  const service = expected.serviceId ? { serviceId: expected.serviceId } : {};
  if (allocationsOn(panel)) {
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ ...service, status: 'pending', sessionId: null, ackedAt: null, reason: HANDED_TO_SCHEDULER });
    expect(typeof res.body.dispatchedAt).toBe('string');
  } else {
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ ...service, status: 'delivered', ...(expected.sessionId ? { sessionId: expected.sessionId } : {}) });
  }
}

/** The status a deployment is in right after its POST while it is not final: delivered, or pending with the scheduler. */
export const acceptedState = (panel: { config: PanelConfig }): 'pending' | 'delivered' => (allocationsOn(panel) ? 'pending' : 'delivered');

/**
 * A failed deployment's reason: the agent's "CODE: reason" as is on the single-node path; managed by allocations, the
 * node that reported it follows, then where the replicas went back (docs/api.md): `CODE: reason (on node NAME); every
 * replica moved to it goes back to release ID`.
 */
export function failureReason(panel: { config: PanelConfig }, agentReason: string, where: { node: string; previous: string }): string {
  return allocationsOn(panel) ? `${agentReason} (on node ${where.node}); every replica moved to it goes back to release ${where.previous}` : agentReason;
}

/** The same suffix as a regular expression's source, for reasons matched by pattern ('' on the single-node path). */
export function failureSuffix(panel: { config: PanelConfig }, where: { node?: string; previous?: string } = {}): string {
  if (!allocationsOn(panel)) return '';
  const esc = (t: string) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return ` \\(on node ${where.node ? esc(where.node) : '\\S+'}\\); every replica moved to it goes back to release ${where.previous ? esc(where.previous) : '\\S+'}`;
}

/**
 * The first sentence of a service's status reason: `N/M running, reported by session ID` on the single-node path;
 * managed by allocations, counted from its allocations: `N/M running across K node(s) by their allocations`
 * (the evidence is per replica, in allocations[].evidence).
 */
export function countedReason(panel: { config: PanelConfig }, running: number, desired: number, sessionId: string, nodes = 1): string {
  return allocationsOn(panel) ? `${running}/${desired} running across ${nodes} node(s) by their allocations` : `${running}/${desired} running, reported by session ${sessionId}`;
}
