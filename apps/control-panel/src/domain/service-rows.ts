import { Prisma, type Node, type Service } from '../generated/prisma/client.js';
import { waitingReplicas } from '../db/json-columns.js';
import type { ServiceHealthCheck, ServiceResources, ServiceRollout, ServiceSpec, ServiceVolume } from '../db/deployment-spec.js';
import { placementOf } from './placement.js';
import { normaliseResources } from './service-fields.js';
import { presentSecrets } from './service-secrets.js';

// A service's row both ways: the spec and the answer read from its columns,
// and Prisma's data for the columns a request writes (domain/services.ts).

export type ServiceWithNode = Service & { node: Pick<Node, 'name'> | null; secrets: { name: string; version: number; setAt: Date }[] };

/** A service's spec as its row holds it now: the optional fields always present. */
type CurrentSpec = ServiceSpec & Required<Pick<ServiceSpec, 'command' | 'args' | 'resources' | 'volumes' | 'healthCheck' | 'drainSeconds' | 'failover' | 'rollout'>>;

export const specOf = (s: Service): CurrentSpec => ({
  name: s.name,
  image: s.image,
  env: s.env as Record<string, string>,
  internalPort: s.internalPort,
  replicas: s.replicas,
  ...processSpecOf(s),
  drainSeconds: s.drainSeconds,
  failover: { fence: s.fence },
  rollout: rolloutOf(s),
});

/** The rollout columns as the spec carries them (null: the default). */
export const rolloutOf = (s: Pick<Service, 'rolloutMaxSurge' | 'rolloutMaxUnavailable' | 'rolloutProgressDeadlineSeconds'>): ServiceRollout => ({
  maxSurge: s.rolloutMaxSurge,
  maxUnavailable: s.rolloutMaxUnavailable,
  progressDeadlineSeconds: s.rolloutProgressDeadlineSeconds,
});

/** Prisma's data for the rollout columns; undefined leaves them as they are. */
export const rolloutColumns = (rollout: ServiceRollout | undefined) =>
  rollout === undefined ? {} : { rolloutMaxSurge: rollout.maxSurge, rolloutMaxUnavailable: rollout.maxUnavailable, rolloutProgressDeadlineSeconds: rollout.progressDeadlineSeconds };

/** The command, resources and volumes columns as the spec carries them. */
export const processSpecOf = (s: Service): Required<Pick<ServiceSpec, 'command' | 'args' | 'resources' | 'volumes' | 'healthCheck'>> => ({
  command: (s.command as string[] | null) ?? null,
  args: (s.args as string[] | null) ?? null,
  resources: (s.resources as ServiceResources | null) ?? null,
  volumes: (s.volumes as unknown as ServiceVolume[] | null) ?? [],
  healthCheck: (s.healthCheck as unknown as ServiceHealthCheck | null) ?? null,
});

export const presentService = (s: ServiceWithNode) => ({
  id: s.id,
  teamId: s.teamId,
  ...specOf(s),
  secrets: presentSecrets(s.secrets),
  placement: placementOf(s.placement),
  nodeId: s.nodeId,
  nodeName: s.node?.name ?? null,
  pending: waitingReplicas(s),
  createdAt: s.createdAt.toISOString(),
  updatedAt: s.updatedAt.toISOString(),
});

/** Prisma's data for the command, resources and volumes columns: undefined leaves a column as it is, null clears it. */
export function processColumns(input: { command?: string[] | null; args?: string[] | null; resources?: ServiceResources | null; volumes?: ServiceVolume[]; healthCheck?: ServiceHealthCheck | null }) {
  const json = (value: unknown) => (value === null ? Prisma.DbNull : (value as Prisma.InputJsonValue | undefined));
  return {
    command: json(input.command),
    args: json(input.args),
    resources: json(normaliseResources(input.resources)),
    volumes: input.volumes as unknown as Prisma.InputJsonValue | undefined,
    healthCheck: json(input.healthCheck),
  };
}
