import { AGENT_MESSAGE_TYPES, CAPABILITIES, type Capability, type Hello } from '@tether/protocol';

/**
 * Optional protocol features this panel speaks (docs/protocol.md, "Capabilities"). `workload.allocations` only
 * with `allocations` (TETHER_ALLOCATIONS=on): such a session gets `allocations` sets (dispatch/allocation-sync.ts)
 * and may send `allocations.status`, and the scheduler places its node's services.
 */
export function panelCapabilities(allocations: boolean, certificates: boolean): ReadonlySet<string> {
  // Cross-node routing serves replicas of allocations: without them it has nothing to route to.
  // Fenced releases travel in allocations sets only (and failover, which waits for the fence, places allocations).
  const allocationsOnly: string[] = [CAPABILITIES.WORKLOAD_ALLOCATIONS, CAPABILITIES.ROUTING_REMOTE, CAPABILITIES.CERTIFICATES_SHARE, CAPABILITIES.WORKLOAD_FENCE, CAPABILITIES.ALLOCATIONS_DRAIN];
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
  'allocations.drained': CAPABILITIES.ALLOCATIONS_DRAIN,
  'certificates.report': CAPABILITIES.CERTIFICATES_SHARE,
};

/** Whether an open session may send a frame of this type: one the protocol lists, and its capability agreed. */
export function acceptedOnSession(type: string, session: { hasCapability(capability: string): boolean }): boolean {
  const needed = NEEDS[type];
  return AGENT_TYPES.has(type) && (needed === undefined || session.hasCapability(needed));
}

/**
 * What a session agrees: the capabilities its hello names that this panel speaks, null for an agent that names
 * none (older ones: no `capabilities` field in welcome). workload.fence without hello.fence names no deadline
 * failover could wait for; allocations.drain reports drains of allocation rollouts, so only beside
 * workload.allocations and workload.drain.
 */
export function agreedCapabilities(spoken: ReadonlySet<string>, hello: Pick<Hello, 'capabilities' | 'fence'>): string[] | null {
  if (!hello.capabilities) return null;
  const named = (c: string) => spoken.has(c) && hello.capabilities!.includes(c);
  const agreed = (c: string) =>
    spoken.has(c) &&
    (c !== CAPABILITIES.WORKLOAD_FENCE || hello.fence !== undefined) &&
    (c !== CAPABILITIES.ALLOCATIONS_DRAIN || (named(CAPABILITIES.WORKLOAD_ALLOCATIONS) && named(CAPABILITIES.WORKLOAD_DRAIN)));
  return [...new Set(hello.capabilities)].filter(agreed);
}
