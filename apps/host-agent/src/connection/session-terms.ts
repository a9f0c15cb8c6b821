import { CAPABILITIES } from '@tether/protocol';
import type { CertificateSharing, RoutingController, WorkloadController } from '../controllers.js';
import type { LogStreams } from '../logs/index.js';

// What one panel session agreed on: the capabilities its welcome confirmed, each read against the part that carries
// it out. Every check of a confirmed capability on the agent is here (hello's announcements are handshake.ts); a
// frame of a capability the session did not agree on is refused like an unknown type (panel-session.ts).

export class SessionTerms {
  constructor(
    readonly confirmed: readonly string[],
    private readonly parts: { workloads: WorkloadController; routing: RoutingController; logs?: LogStreams | undefined },
  ) {}

  private has(capability: string): boolean {
    return this.confirmed.includes(capability);
  }

  /** workload.allocations: the `allocations` set is the one intent path (`deploy` and `workloads` are refused). */
  get allocations(): boolean {
    return this.has(CAPABILITIES.WORKLOAD_ALLOCATIONS) && this.parts.workloads.setAllocations !== undefined;
  }

  /** `volumes.remove`: workload.volumes, and volumes.inventory for single volumes (`names`). */
  volumesRemove(names: readonly string[] | undefined): boolean {
    return this.parts.workloads.removeVolumes !== undefined && this.has(CAPABILITIES.WORKLOAD_VOLUMES) && (!names || this.has(CAPABILITIES.VOLUMES_INVENTORY));
  }

  /** volumes.inventory: `volumes.report` goes out. */
  get volumesInventory(): boolean {
    return this.has(CAPABILITIES.VOLUMES_INVENTORY);
  }

  /** certificates.share: the proxy's side, when both ends named it. */
  get certificates(): CertificateSharing | null {
    return this.has(CAPABILITIES.CERTIFICATES_SHARE) ? (this.parts.routing.certificateSharing ?? null) : null;
  }

  /** logs: the log streams, when both ends named it. */
  get logs(): LogStreams | null {
    return this.parts.logs && this.has(CAPABILITIES.LOGS) ? this.parts.logs : null;
  }

  /** workload.drain: a drain's end (`deploy.drained`) goes to this panel (one that did not never sent drainSeconds). */
  get drainReports(): boolean {
    return this.has(CAPABILITIES.WORKLOAD_DRAIN);
  }

  /** allocations.drain: an allocation rollout's drain (`allocations.drained`) goes to this panel. */
  get allocationDrainReports(): boolean {
    return this.has(CAPABILITIES.ALLOCATIONS_DRAIN);
  }

  /** Whether this panel takes the drain report (deploy.drained or allocations.drained). */
  takesDrain(type: 'deploy.drained' | 'allocations.drained'): boolean {
    return type === 'deploy.drained' ? this.drainReports : this.allocationDrainReports;
  }

  /** routing.remote: `allocations.status` carries each allocation's endpoint. */
  get remoteEndpoints(): boolean {
    return this.has(CAPABILITIES.ROUTING_REMOTE);
  }
}
