import { recordChange, type AuditContext } from '../audit/audit-entry.js';
import type { Db } from '../db/database.js';
import { AppError } from '../errors.js';
import { teamScope, type AuthContext } from './access.js';
import type { ApiDeps } from './api-deps.js';

// GET /v1/volumes and DELETE /v1/volumes/:id: the named volumes nodes reported (node_volumes, written by
// sessions/volume-reports.ts), with what the panel knows of their services. A volume is "kept" when no
// service of its id runs on its node any more (deleted without ?deleteVolumes, or moved with leaveVolumes);
// only a kept volume can be deleted on its own, through its node's live session.

const notFound = () => new AppError('NOT_FOUND', 'no such volume');

export interface VolumeView {
  id: string;
  nodeId: string;
  nodeName: string;
  serviceId: string;
  serviceName: string | null;
  teamId: string | null;
  name: string;
  dockerName: string;
  mountPath: string | null;
  readOnly: boolean | null;
  kept: boolean;
  createdAt: string | null;
  sizeBytes: number | null;
  measuredAt: string | null;
  reportedAt: string;
}

interface Row {
  id: string;
  nodeId: string;
  node: { name: string };
  serviceId: string;
  serviceName: string | null;
  teamId: string | null;
  name: string;
  dockerName: string;
  createdAt: Date | null;
  sizeBytes: bigint | null;
  measuredAt: Date | null;
  reportedAt: Date;
}

type Mount = { name: string; mountPath: string; readOnly?: boolean };

/** The services of these rows that still run on the rows' nodes, by id. */
async function owners(prisma: Pick<Db, 'service'>, rows: readonly Row[]) {
  const services = await prisma.service.findMany({ where: { id: { in: [...new Set(rows.map((r) => r.serviceId))] } }, select: { id: true, nodeId: true, name: true, volumes: true } });
  return new Map(services.map((s) => [s.id, s]));
}

function present(row: Row, owner: { nodeId: string | null; name: string; volumes: unknown } | undefined): VolumeView {
  const here = owner && owner.nodeId === row.nodeId ? owner : undefined;
  const mount = here ? (here.volumes as Mount[]).find((v) => v.name === row.name) : undefined;
  return {
    id: row.id,
    nodeId: row.nodeId,
    nodeName: row.node.name,
    serviceId: row.serviceId,
    serviceName: owner?.name ?? row.serviceName,
    teamId: row.teamId,
    name: row.name,
    dockerName: row.dockerName,
    mountPath: mount?.mountPath ?? null,
    readOnly: mount ? mount.readOnly === true : null,
    kept: !here,
    createdAt: row.createdAt?.toISOString() ?? null,
    sizeBytes: row.sizeBytes === null ? null : Number(row.sizeBytes),
    measuredAt: row.measuredAt?.toISOString() ?? null,
    reportedAt: row.reportedAt.toISOString(),
  };
}

export async function listVolumes({ prisma }: ApiDeps, auth: AuthContext, filter: { nodeId?: string; serviceId?: string; kept?: boolean }): Promise<VolumeView[]> {
  const rows = await prisma.nodeVolume.findMany({
    where: { ...teamScope(auth), ...(filter.nodeId ? { nodeId: filter.nodeId } : {}), ...(filter.serviceId ? { serviceId: filter.serviceId } : {}) },
    include: { node: { select: { name: true } } },
    orderBy: [{ nodeId: 'asc' }, { dockerName: 'asc' }],
  });
  const byId = await owners(prisma, rows);
  const views = rows.map((r) => present(r, byId.get(r.serviceId)));
  return filter.kept === undefined ? views : views.filter((v) => v.kept === filter.kept);
}

/**
 * Deletes a kept volume on its node: 409 VOLUME_IN_USE while its service is on that node; the node's live
 * session (with volumes.inventory) is checked before anything is recorded (503 NODE_UNREACHABLE /
 * 409 AGENT_LACKS_CAPABILITY, nothing changes); then `volumes.remove` naming it, answered on the ACK.
 * The row goes with the agent's next report once Docker removed the volume.
 */
export async function deleteVolume({ prisma, volumes }: ApiDeps, auth: AuthContext, id: string, audit?: AuditContext): Promise<VolumeView> {
  const { row, view } = await prisma.$transaction(async (tx) => {
    const row = await tx.nodeVolume.findFirst({ where: { id, ...teamScope(auth) }, include: { node: { select: { name: true } } } });
    if (!row) throw notFound();
    const view = present(row, (await owners(tx, [row])).get(row.serviceId));
    if (!view.kept) {
      throw new AppError('VOLUME_IN_USE', `volume ${row.name} belongs to service ${view.serviceName ?? row.serviceId} on node ${row.node.name}; delete the service with ?deleteVolumes=true, or move it away first`);
    }
    if (!volumes) throw new AppError('NODE_UNREACHABLE', 'this panel cannot reach nodes: the volume cannot be removed; nothing changed');
    volumes.check({ id: row.nodeId, name: row.node.name }, [row.name]);
    await recordChange(tx, audit, { action: 'volume.delete', targetType: 'volume', targetId: id, teamId: row.teamId });
    return { row, view };
  });
  // After the commit (no network wait inside a transaction): not taken, the volume stays and the call can be repeated.
  await volumes!.remove({ id: row.nodeId, name: row.node.name }, row.serviceId, [row.name]);
  return view;
}
