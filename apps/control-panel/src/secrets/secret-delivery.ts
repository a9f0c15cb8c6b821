import { CAPABILITIES, type Workload } from '@tether/protocol';
import type { Db } from '../db/database.js';
import type { Keyring } from './keyring.js';
import { openSecrets, type SecretRef } from './secret-store.js';

// Where secrets' values join a workload: right before a `deploy` or
// `workloads` frame goes out on the session of the node that runs it, and
// only if that agent announced the `secrets` capability. Until then a
// workload carries only the versions its deployment recorded.

/** A workload as the panel holds it: the secret versions to send, not their values. */
export type PlannedWorkload = Workload & { secretRefs?: SecretRef[] };

interface CapableSession {
  hasCapability(capability: string): boolean;
}

export const needsSecrets = (w: PlannedWorkload): boolean => (w.secretRefs?.length ?? 0) > 0;

/** The reason a deployment ends with when its agent cannot take secrets. */
export const lacksSecretsReason = (nodeName: string) =>
  `AGENT_LACKS_CAPABILITY: the agent of node ${nodeName} does not announce the "${CAPABILITIES.SECRETS}" capability, and the deployment has secrets; upgrade the agent`;

export class SecretDelivery {
  constructor(
    private readonly db: Db,
    private readonly keyring: Keyring | null,
  ) {}

  /**
   * The frame form of workloads for one session: secret values in, versions
   * out. Workloads with secrets for an agent without the capability are not
   * in `wire` but in `refused` (they must never run without them).
   */
  async toWire(session: CapableSession, workloads: readonly PlannedWorkload[]): Promise<{ wire: Workload[]; refused: PlannedWorkload[] }> {
    const capable = session.hasCapability(CAPABILITIES.SECRETS);
    const refused = capable ? [] : workloads.filter(needsSecrets);
    const sending = capable ? workloads : workloads.filter((w) => !needsSecrets(w));
    const wanted = sending.flatMap((w) => (w.secretRefs ?? []).map((r) => ({ serviceId: w.serviceId, name: r.name, version: r.version })));
    const values = await openSecrets(this.db, this.keyring, wanted);
    const wire = sending.map(({ secretRefs, ...workload }) => (secretRefs && secretRefs.length > 0 ? { ...workload, secrets: values.get(workload.serviceId) ?? {} } : workload));
    return { wire, refused };
  }
}
