import { KeyedSerialQueue, TickBatcher, type Logger } from '@tether/common';
import { CAPABILITIES, createIdGenerator, type AllocationsStatus, type Capability, type Workload } from '@tether/protocol';
import { sqlOf, type Db } from '../db/database.js';
import { forAgent, releaseOf, type PlannedWorkload, type ServiceSpec } from '../db/deployment-spec.js';
import { allocationsFrame, type LeftOutAllocation } from '../scheduling/allocation-frames.js';
import { desiredWorkloads } from '../scheduling/desired-workloads.js';
import type { Allocation } from '../scheduling/types.js';
import { lackedDelivery, needsDelivery, type SecretDelivery } from '../secrets/secret-delivery.js';
import { OPEN_READ_LINGER_MS } from '../session-writes/session-store.js';
import type { SessionFactOutbox } from '../session-writes/outbox.js';
import type { SessionRegistry } from '../sessions/registry.js';
import type { AgentSession } from '../sessions/session.js';

// The session side of allocations (issue 36, capability `workload.allocations`).
//
// Out: a session whose agent speaks the capability is sent its node's complete
// `allocations` set (every allocation with desired='run' and the spec of each
// release, secrets' values and registry credentials joined as in a deploy)
// when it opens and whenever the scheduler says the node's set changed. Sends
// to one session go one after another, so a slow read never overtakes a newer
// set; each awaits its ACK under the ACK timeout. Such a session never gets
// `workloads` (WorkloadSync skips it). An allocation the set cannot carry
// (release unknown, a capability the agent lacks, past the frame's bound) is
// left out, logged, and kept here until the next set, for the status answers.
// No set goes out while a service homed on the node awaits its adoption (a
// managed service with replicas and a running release but no allocation yet:
// the upgrade's first evaluation makes them): the agent would read the set as
// the node's whole intent and retire the containers the adoption is about to
// take over. The adoption's commit tells the node, and the set follows.
//
// In: the agent's `allocations.status` (complete each time, not ACKed) is
// recorded on the node's allocation rows through the session-fact outbox
// (fact `allocations.status`: one statement, only rows whose status changed,
// fenced by the session's generation); then every listener given to
// `onStatusStored` hears the node's id (the scheduler's rollouts, the routing
// audience of cross-node routing).

export const allocationsCapable = (session: Pick<AgentSession, 'hasCapability'>): boolean => session.hasCapability(CAPABILITIES.WORKLOAD_ALLOCATIONS);

/** An allocation that its node's last set left out, and why (kept while its session lives). */
export type LeftOut = Omit<LeftOutAllocation, 'reason' | 'releaseId'> & { releaseId: string | null; reason: LeftOutAllocation['reason'] };

export interface AllocationSyncOptions {
  registry: Pick<SessionRegistry, 'get'>;
  prisma: Db;
  outbox: Pick<SessionFactOutbox, 'submit'>;
  logger: Logger;
  /** Adds secrets' values and registry credentials (the deploy path's delivery). */
  secrets: SecretDelivery;
  /** The generation a session's claim took (several panels); undefined: none (a lone panel, unfenced). */
  generationOf?: (sessionId: string) => number | undefined;
  /**
   * The node has no session on this panel: tell the panel that holds it (agent-side.ts emits
   * `workloads.changed`, which the cluster forwards). Absent: nothing.
   */
  elsewhere?: (nodeId: string, reason: string) => void;
}

/** A node's set as read: its allocation rows, and the services homed there whose adoption is still to come. */
interface NodeRows {
  rows: AllocationRow[];
  awaitingAdoption: string[];
}

/** One allocation row as the set is read from it. */
interface AllocationRow {
  id: string;
  service_id: string;
  service_name: string;
  release_id: string | null;
  created_at: Date;
  release_service_id: string | null;
  spec: ServiceSpec | null;
}

export class AllocationSync {
  private readonly nextId = createIdGenerator('p');
  private readonly sends = new KeyedSerialQueue<AgentSession>();
  /** Sessions with a send queued that has not started (its read is still to come). */
  private readonly waiting = new WeakSet<AgentSession>();
  /** The node's set, read once for every open of one turn of the loop (a reconnect storm). */
  private readonly reads = new TickBatcher<string, NodeRows>((nodeIds) => this.load(nodeIds), 500, 2, OPEN_READ_LINGER_MS);
  /** Per node: what the last set sent on its live session left out, by allocation id. */
  private readonly leftOutByNode = new Map<string, Map<string, LeftOut>>();

  /**
   * The scheduler's hook, called after a node's statuses were recorded and a row changed (the rollout reads
   * them). Set it once at wiring; the default does nothing.
   */
  private readonly statusListeners = new Set<(nodeId: string) => void>();

  /** Called with the node's id each time its statuses changed rows; returns what removes the listener. */
  onStatusStored(listener: (nodeId: string) => void): () => void {
    this.statusListeners.add(listener);
    return () => void this.statusListeners.delete(listener);
  }

  constructor(private readonly options: AllocationSyncOptions) {}

  /** A session opened: a capable one gets the whole set (others get `workloads`, see WorkloadSync). */
  sessionOpened(session: AgentSession): void {
    if (allocationsCapable(session)) this.enqueue(session, 'session opened');
  }

  sessionClosed(session: AgentSession): void {
    if (this.options.registry.get(session.nodeId) === undefined) this.leftOutByNode.delete(session.nodeId);
  }

  /**
   * The node's allocations changed (the scheduler, after its write committed): send the set again if the node
   * has a capable session here; without a session here, the panel holding it is told (see `elsewhere`).
   */
  changed(nodeId: string, reason: string): void {
    if (this.options.registry.get(nodeId)) this.changedHere(nodeId, reason);
    else this.options.elsewhere?.(nodeId, reason);
  }

  /** As changed(), for this panel's session only (the listener of `workloads.changed`: never forwards). */
  changedHere(nodeId: string, reason: string): void {
    const session = this.options.registry.get(nodeId);
    if (session && allocationsCapable(session)) this.enqueue(session, reason);
  }

  /** What the node's last set left out (empty: nothing, or no capable session here). */
  leftOut(nodeId: string): ReadonlyMap<string, LeftOut> {
    return this.leftOutByNode.get(nodeId) ?? new Map();
  }

  /**
   * The agent's allocations.status: recorded (only rows that changed; desired=stop allocations it no longer
   * lists read `removed`), then the hook. Resolves when written (the outbox holds it through an outage).
   */
  async statusReceived(session: AgentSession, message: AllocationsStatus): Promise<void> {
    const generation = this.options.generationOf?.(session.id);
    // A closed session's frame (or, among several panels, one whose claim this panel no longer holds) is not recorded.
    if (session.closed || (this.options.generationOf && generation === undefined)) return;
    const statuses = message.allocations.map(({ allocationId, serviceId, ...status }) => ({ allocationId, serviceId, status }));
    try {
      const changed = await this.options.outbox.submit({
        kind: 'allocations.status',
        nodeId: session.nodeId,
        sessionId: session.id,
        at: new Date().toISOString(),
        statuses,
        ...(generation === undefined ? {} : { generation }),
      });
      if (changed !== true) return;
      for (const listener of this.statusListeners) {
        try {
          listener(session.nodeId);
        } catch (err) {
          this.options.logger.error({ err, node: session.nodeName }, 'allocation status listener failed');
        }
      }
    } catch (err) {
      this.options.logger.error({ err, node: session.nodeName }, 'allocation statuses not recorded');
    }
  }

  /** Waits for the sends in flight. */
  async stop(): Promise<void> {
    await this.sends.idle();
  }

  private enqueue(session: AgentSession, reason: string): void {
    // A send queued and not started yet reads the node's rows when it starts: it carries this change too.
    if (this.waiting.has(session)) return;
    this.waiting.add(session);
    void this.sends.run(session, () => {
      this.waiting.delete(session);
      return this.send(session, reason);
    });
  }

  private async send(session: AgentSession, reason: string): Promise<void> {
    try {
      const { rows, awaitingAdoption } = (await this.reads.load(session.nodeId)) ?? { rows: [], awaitingAdoption: [] };
      if (session.closed) return;
      if (awaitingAdoption.length > 0) {
        this.options.logger.info({ node: session.nodeName, services: awaitingAdoption, reason }, 'allocations held until the scheduler adopts what the node runs');
        return;
      }
      const { frame, leftOut } = await this.frameFor(session, rows);
      if (session.closed) return;
      this.leftOutByNode.set(session.nodeId, new Map(leftOut.map((l) => [l.allocationId, l])));
      // A replica of a service with no release yet (created, not deployed) is left out by design: only the others warn.
      const worth = leftOut.filter((l) => l.releaseId !== null);
      if (worth.length > 0) {
        this.options.logger.warn(
          { node: session.nodeName, leftOut: worth.map((l) => ({ allocationId: l.allocationId, releaseId: l.releaseId, reason: l.reason, ...(l.missing ? { missing: l.missing } : {}) })) },
          'allocations left out of the set',
        );
      }
      await session.sendAwaitingAck({ ...frame, id: this.nextId() });
      this.options.logger.debug({ node: session.nodeName, count: frame.allocations.length, releases: frame.releases.length, reason }, 'allocations sent');
    } catch (err) {
      // An ACK timeout already tore the session down; the next session gets the set again.
      this.options.logger.warn({ err, node: session.nodeName, reason }, 'allocations not delivered');
    }
  }

  /** The frame for the session from its node's rows (exported logic: allocationsFrame; here the reads and secrets). */
  private async frameFor(session: AgentSession, rows: AllocationRow[]): Promise<{ frame: ReturnType<typeof allocationsFrame>['frame']; leftOut: LeftOut[] }> {
    const leftOut: LeftOut[] = [];
    const placed: Allocation[] = [];
    const planned = new Map<string, PlannedWorkload>();
    for (const r of rows) {
      if (r.release_id === null) {
        // No release yet (the service was never deployed): nothing to run.
        leftOut.push({ allocationId: r.id, serviceId: r.service_id, releaseId: null, reason: 'RELEASE_UNKNOWN' });
        continue;
      }
      placed.push({ id: r.id, serviceId: r.service_id, nodeId: session.nodeId, releaseId: r.release_id, createdAt: r.created_at.getTime(), desired: 'run' });
      // The release's spec as the deploy path builds it; the name is the service's now (a rename after the deploy).
      if (r.spec && r.release_service_id !== null && !planned.has(r.release_id)) {
        planned.set(r.release_id, releaseOf(r.release_service_id, r.release_id, { ...r.spec, name: r.service_name }));
      }
    }
    const desired = desiredWorkloads([session.nodeId], placed).get(session.nodeId) ?? [];
    const { wire, lacking } = await this.wire(session, [...planned.values()]);
    const releases = new Map<string, Workload>(wire.map((w) => [w.deploymentId, forAgent(session, w)]));
    const built = allocationsFrame(desired, releases, new Set(session.capabilities));
    for (const l of built.leftOut) {
      const missing = lacking.get(l.releaseId);
      leftOut.push(missing ? { ...l, reason: 'AGENT_LACKS_CAPABILITY', missing } : l);
    }
    return { frame: built.frame, leftOut };
  }

  /** Secrets' values and registry credentials in, as in a deploy; a release that needs what the agent cannot take is not sent. */
  private async wire(session: AgentSession, planned: PlannedWorkload[]): Promise<{ wire: Workload[]; lacking: Map<string, Capability[]> }> {
    if (!planned.some(needsDelivery)) return { wire: planned, lacking: new Map() };
    const { wire, refused } = await this.options.secrets.toWire(session, planned);
    return { wire, lacking: new Map(refused.map((w) => [w.deploymentId, lackedDelivery(session, w)])) };
  }

  private async load(nodeIds: string[]): Promise<Map<string, NodeRows>> {
    const sql = sqlOf(this.options.prisma);
    const rows = await sql.rows<AllocationRow & { node_id: string }>(
      `SELECT a.id, a.node_id, a.service_id, s.name AS service_name, a.release_id, a.created_at,
        d.service_id AS release_service_id, d.spec
      FROM allocations a
      JOIN services s ON s.id = a.service_id
      LEFT JOIN deployments d ON d.id = a.release_id
      WHERE a.node_id = ANY($1::text[]) AND a.desired = 'run'`,
      [nodeIds],
    );
    // As scheduling/evaluation.ts adopts: a managed service with no allocation at all, replicas wanted, a running
    // release. Managed without asking the node row: these nodes have a session that agreed workload.allocations, so
    // they are managed, while the row may still hold what the last panel without allocations recorded (the open's
    // write comes through the outbox; once, under load, it landed after this read, the node read as unmanaged, an
    // empty set went out and the upgraded agent retired every container the adoption was about to take over).
    const awaiting = await sql.rows<{ node_id: string; id: string }>(
      `SELECT s.node_id, s.id FROM services s
      WHERE s.node_id = ANY($1::text[]) AND s.replicas > 0
        AND NOT EXISTS (SELECT 1 FROM allocations a WHERE a.service_id = s.id)
        AND EXISTS (SELECT 1 FROM deployments d WHERE d.service_id = s.id AND d.status = 'running')`,
      [nodeIds],
    );
    const byNode = new Map<string, NodeRows>();
    const of = (nodeId: string) => {
      let set = byNode.get(nodeId);
      if (!set) byNode.set(nodeId, (set = { rows: [], awaitingAdoption: [] }));
      return set;
    };
    for (const r of rows) of(r.node_id).rows.push(r);
    for (const a of awaiting) of(a.node_id).awaitingAdoption.push(a.id);
    return byNode;
  }
}
