import { CAPABILITIES, type Capability, type Workload } from '@tether/protocol';
import type { Db } from '../db/database.js';
import type { Keyring } from './keyring.js';
import { openRegistryCredentials } from './registry-credentials.js';
import type { PlannedWorkload } from '../db/deployment-spec.js';
import { openSecrets } from './secret-store.js';

// Where secrets' values and registry credentials join a workload: right
// before a `deploy` or `workloads` frame goes out on the session of the node
// that runs it, and only if that agent announced the matching capability
// (`secrets`, `registry.auth`). Until then a workload carries only the secret
// versions and the registry (id and host) its deployment recorded.

export type { PlannedWorkload } from '../db/deployment-spec.js';

interface CapableSession {
  hasCapability(capability: string): boolean;
}

export const needsSecrets = (w: PlannedWorkload): boolean => (w.secretRefs?.length ?? 0) > 0;
export const needsRegistry = (w: PlannedWorkload): boolean => w.registryRef !== undefined;
/** Whether the frame form of `w` is made here (values or credentials join it). */
export const needsDelivery = (w: PlannedWorkload): boolean => needsSecrets(w) || needsRegistry(w);

/** The delivery capabilities `w` needs that the session's agent did not announce. */
export function lackedDelivery(session: CapableSession, w: PlannedWorkload): Capability[] {
  const lacking: Capability[] = [];
  if (needsSecrets(w) && !session.hasCapability(CAPABILITIES.SECRETS)) lacking.push(CAPABILITIES.SECRETS);
  if (needsRegistry(w) && !session.hasCapability(CAPABILITIES.REGISTRY_AUTH)) lacking.push(CAPABILITIES.REGISTRY_AUTH);
  return lacking;
}

/** The reason a deployment ends with when its agent cannot take what it needs delivered. */
export function lacksDeliveryReason(nodeName: string, lacking: readonly Capability[]): string {
  const what = lacking.map((c) => (c === CAPABILITIES.SECRETS ? 'secrets' : "credentials for its image's registry")).join(' and ');
  return `AGENT_LACKS_CAPABILITY: the agent of node ${nodeName} does not announce ${lacking.map((c) => `"${c}"`).join(', ')}, and the deployment has ${what}; upgrade the agent`;
}

export class SecretDelivery {
  constructor(
    private readonly db: Db,
    private readonly keyring: Keyring | null,
  ) {}

  /**
   * The frame form of workloads for one session: secret values and registry
   * credentials in, references out. Workloads that need a capability the agent
   * did not announce are not in `wire` but in `refused` (they must never run
   * without what they need). A registry deleted since the deployment was made
   * sends no credentials (the agent pulls without, and refuses a private image
   * it cannot check).
   */
  async toWire(session: CapableSession, workloads: readonly PlannedWorkload[]): Promise<{ wire: Workload[]; refused: PlannedWorkload[] }> {
    const refused = workloads.filter((w) => lackedDelivery(session, w).length > 0);
    const sending = workloads.filter((w) => lackedDelivery(session, w).length === 0);
    const wanted = sending.flatMap((w) => (w.secretRefs ?? []).map((r) => ({ serviceId: w.serviceId, name: r.name, version: r.version })));
    const values = await openSecrets(this.db, this.keyring, wanted);
    const credentials = await openRegistryCredentials(this.db, this.keyring, sending.flatMap((w) => (w.registryRef ? [w.registryRef.id] : [])));
    const wire = sending.map(({ secretRefs, registryRef, ...workload }) => {
      const auth = registryRef ? credentials.get(registryRef.id) : undefined;
      return {
        ...workload,
        ...(secretRefs && secretRefs.length > 0 ? { secrets: values.get(workload.serviceId) ?? {} } : {}),
        // A registry since replaced with another host has no credentials for this image.
        ...(auth && auth.host === registryRef!.host ? { registryAuth: auth } : {}),
      };
    });
    return { wire, refused };
  }
}
