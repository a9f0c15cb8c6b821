import { CAPABILITIES, type ReportedVolume, type VolumesReport } from '@tether/protocol';
import type { Logger } from '@tether/common';
import type { Db } from '../db/database.js';
import type { SessionRegistry } from './registry.js';
import type { AgentSession } from './session.js';

// A node's named volumes as its agent reports them (`volumes.report`, capability volumes.inventory):
// stored in node_volumes, so every panel lists them (GET /v1/volumes) and a volume stays listed while its
// node is away, with the time of the report it comes from. A report is the node's complete set; the table
// is written only when it differs from the last one written for the node (agents repeat theirs once per
// measure interval, which also heals a write the database refused).

const timeOf = (iso: string | null): Date | null => {
  if (iso === null) return null;
  const t = new Date(iso);
  return Number.isNaN(t.getTime()) ? null : t;
};

export class VolumeReports {
  /** What was last written per node (the report's volumes as JSON). */
  private readonly written = new Map<string, string>();
  /** One write at a time per node, in arrival order. */
  private readonly queue = new Map<string, Promise<void>>();

  constructor(
    private readonly prisma: Db,
    private readonly registry: SessionRegistry,
    private readonly logger: Logger,
  ) {}

  received(session: AgentSession, message: VolumesReport): void {
    if (!session.hasCapability(CAPABILITIES.VOLUMES_INVENTORY)) return;
    const nodeId = session.nodeId;
    const next = (this.queue.get(nodeId) ?? Promise.resolve())
      .then(() => this.store(session, message.volumes))
      .catch((err: unknown) => this.logger.warn({ err, node: session.nodeName }, 'volume report not stored; the agent repeats it'));
    this.queue.set(nodeId, next);
    void next.finally(() => {
      if (this.queue.get(nodeId) === next) this.queue.delete(nodeId);
    });
  }

  sessionClosed(session: AgentSession): void {
    // The next session's first report is written whatever it says (another panel may have written since).
    if (!this.registry.get(session.nodeId)) this.written.delete(session.nodeId);
  }

  /** Waits for the writes started so far (tests, stop). */
  async idle(): Promise<void> {
    await Promise.all([...this.queue.values()]);
  }

  private async store(session: AgentSession, volumes: ReportedVolume[]): Promise<void> {
    const nodeId = session.nodeId;
    const content = JSON.stringify(volumes);
    if (this.written.get(nodeId) === content) return;
    // Only the node's live session speaks for it: a report of a session already replaced is stale.
    if (session.closed || this.registry.get(nodeId) !== session) return;
    const now = new Date();
    await this.prisma.$transaction(async (tx) => {
      const serviceIds = [...new Set(volumes.map((v) => v.serviceId))];
      const services = new Map((await tx.service.findMany({ where: { id: { in: serviceIds } }, select: { id: true, teamId: true, name: true } })).map((s) => [s.id, s]));
      await tx.nodeVolume.deleteMany({ where: { nodeId, dockerName: { notIn: volumes.map((v) => v.dockerName) } } });
      for (const v of volumes) {
        const service = services.get(v.serviceId);
        const fields = {
          serviceId: v.serviceId,
          name: v.volume,
          createdAt: timeOf(v.createdAt),
          sizeBytes: v.sizeBytes === null ? null : BigInt(v.sizeBytes),
          measuredAt: timeOf(v.measuredAt),
          reportedAt: now,
        };
        // The team and name of the service while it exists; kept as they were once it is deleted.
        const owner = service ? { teamId: service.teamId, serviceName: service.name } : {};
        await tx.nodeVolume.upsert({
          where: { nodeId_dockerName: { nodeId, dockerName: v.dockerName } },
          create: { nodeId, dockerName: v.dockerName, ...fields, ...owner },
          update: { ...fields, ...owner },
        });
      }
    });
    this.written.set(nodeId, content);
  }
}
