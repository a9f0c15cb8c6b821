import { AGENT_MESSAGE_TYPES, CAPABILITIES, type Capability } from '@tether/protocol';

/**
 * Optional protocol features this panel speaks (docs/protocol.md, "Capabilities"). `workload.allocations` only
 * with `allocations` (TETHER_ALLOCATIONS=on): such a session gets `allocations` sets (dispatch/allocation-sync.ts)
 * and may send `allocations.status`, and the scheduler places its node's services.
 */
export function panelCapabilities(allocations: boolean, certificates: boolean): ReadonlySet<string> {
  // Cross-node routing serves replicas of allocations: without them it has nothing to route to.
  // Fenced releases travel in allocations sets only (and failover, which waits for the fence, places allocations).
  const allocationsOnly: string[] = [CAPABILITIES.WORKLOAD_ALLOCATIONS, CAPABILITIES.ROUTING_REMOTE, CAPABILITIES.CERTIFICATES_SHARE, CAPABILITIES.WORKLOAD_FENCE];
  // A certificate's key is stored sealed like a secret: without a key to seal it with, every node orders its own.
  const keyed = (c: string) => certificates || c !== CAPABILITIES.CERTIFICATES_SHARE;
  return new Set(Object.values(CAPABILITIES).filter((c) => (allocations || !allocationsOnly.includes(c)) && keyed(c)));
}

// Once a session is open: every type an agent sends (the protocol's list) but a second hello.
export const AGENT_TYPES: ReadonlySet<string> = new Set(AGENT_MESSAGE_TYPES.filter((type) => type !== 'hello'));

/** The agent → panel messages that exist only on a session that agreed a capability (docs/protocol.md). */
const NEEDS: Readonly<Record<string, Capability>> = {
  'proxy.events': CAPABILITIES.PROXY_EVENTS,
  'volumes.report': CAPABILITIES.VOLUMES_INVENTORY,
  'deploy.drained': CAPABILITIES.WORKLOAD_DRAIN,
  'allocations.status': CAPABILITIES.WORKLOAD_ALLOCATIONS,
  'certificates.report': CAPABILITIES.CERTIFICATES_SHARE,
};

/** Whether an open session may send a frame of this type: one the protocol lists, and its capability agreed. */
export function acceptedOnSession(type: string, session: { hasCapability(capability: string): boolean }): boolean {
  const needed = NEEDS[type];
  return AGENT_TYPES.has(type) && (needed === undefined || session.hasCapability(needed));
}
