import { serviceUpstreamHost, type Release, type Workload } from '@tether/protocol';
import { LABELS } from '../docker/docker-client.js';
import type { ContainerSpec } from './container-runtime.js';

/** tether.role of service containers; other Tether containers (the proxy) carry another role and are never touched here. */
export const WORKLOAD_ROLE = 'workload';

/** The labels that select this node's service containers, and nothing else. */
export function nodeSelector(node: string): Record<string, string> {
  return { [LABELS.managed]: 'true', [LABELS.node]: node, [LABELS.role]: WORKLOAD_ROLE };
}

/** What a container is, read back from its labels. */
export interface WorkloadIdentity {
  serviceId: string;
  deploymentId: string;
  /** null when the label is missing or not a whole number: such a container fills no replica slot. */
  replica: number | null;
  /** The `tether.allocation` label, when the container runs an allocation. */
  allocationId?: string;
  /** The `tether.fence` label: a container of a fenced release (workload.fence). */
  fenced?: true;
}

export function identityOf(labels: Record<string, string>): WorkloadIdentity | null {
  const serviceId = labels[LABELS.service];
  const deploymentId = labels[LABELS.deployment];
  if (!serviceId || !deploymentId) return null;
  const raw = labels[LABELS.replica];
  const replica = raw !== undefined && /^\d{1,3}$/.test(raw) ? Number(raw) : null;
  const allocationId = labels[LABELS.allocation];
  return { serviceId, deploymentId, replica, ...(allocationId ? { allocationId } : {}), ...(labels[LABELS.fence] === 'true' ? { fenced: true as const } : {}) };
}

const slug = (value: string, max: number) =>
  value
    .toLowerCase()
    .replace(/[^a-z0-9_.-]+/g, '-')
    .replace(/^[-_.]+|[-_.]+$/g, '')
    .slice(0, max) || 'x';

/**
 * Deterministic, so a redelivered deployment finds its own container by name
 * conflict instead of making a second one. The node is part of it because
 * several nodes may share one engine (tests, a developer's machine).
 */
export function containerName(node: string, workload: Release, replica: number): string {
  return `tether-${slug(node, 40)}-${slug(workload.serviceName, 60)}-${slug(workload.deploymentId, 60)}-${replica}`;
}

/**
 * An allocation's container: its release is in the name, so during a rollout the allocation's new container
 * stands beside its old one, and a redelivered set finds its own container by name conflict.
 */
export function allocationContainerName(node: string, release: Release, allocationId: string): string {
  return `tether-${slug(node, 40)}-${slug(release.serviceName, 60)}-${slug(release.deploymentId, 60)}-${slug(allocationId, 60)}`;
}

/** The names a service's containers answer under on Tether's network. */
export const serviceAliases = (workload: Pick<Workload, 'serviceId'>): string[] => [serviceUpstreamHost(workload.serviceId)];

export function containerSpec(node: string, network: string, workload: Release, replica: number): ContainerSpec {
  return {
    name: containerName(node, workload, replica),
    image: workload.image,
    // Secrets (capability `secrets`) are environment to the container; the panel keeps names apart from env's.
    env: { ...workload.env, ...workload.secrets },
    labels: {
      ...nodeSelector(node),
      [LABELS.service]: workload.serviceId,
      [LABELS.deployment]: workload.deploymentId,
      [LABELS.replica]: String(replica),
    },
    network,
    // Every container of a service answers under one name, so the proxy's upstream survives redeploys. With an
    // HTTP health check it joins that name only once its check passed (executor.ts startAndCheck).
    aliases: workload.healthCheck ? [] : serviceAliases(workload),
    exposedPort: workload.port,
    ...processOf(workload),
    ...limitsOf(workload),
    ...(workload.volumes && workload.volumes.length > 0
      ? { volumes: workload.volumes.map((v) => ({ source: volumeName(workload.serviceId, v.name), target: v.mountPath, readOnly: v.readOnly })) }
      : {}),
  };
}

/**
 * Kubernetes' meaning: `command` replaces ENTRYPOINT, `args` replaces CMD.
 * Docker applies the image's CMD only when the container keeps the image's
 * ENTRYPOINT, so `command` alone clears CMD as Kubernetes does.
 */
function processOf(workload: Release): Pick<ContainerSpec, 'entrypoint' | 'cmd'> {
  return {
    ...(workload.command === undefined ? {} : { entrypoint: workload.command }),
    ...(workload.args === undefined ? {} : { cmd: workload.args }),
  };
}

const MIB = 1024 * 1024;

function limitsOf(workload: Release): Pick<ContainerSpec, 'nanoCpus' | 'memoryBytes'> {
  const r = workload.resources;
  return {
    ...(r?.cpus === undefined ? {} : { nanoCpus: Math.round(r.cpus * 1e9) }),
    ...(r?.memoryMiB === undefined ? {} : { memoryBytes: r.memoryMiB * MIB }),
  };
}

/**
 * The Docker volume of a service's named volume: a function of the service id
 * and the volume's name only, so every deployment of the service (and the
 * agent after a restart) mounts the same one, and no other service can.
 */
export function volumeName(serviceId: string, name: string): string {
  return `tether-${slug(serviceId, 128)}-${name}`;
}

/** The labels a service's volume is created with (and found by). */
export function volumeLabels(node: string, serviceId: string, name: string): Record<string, string> {
  return { [LABELS.managed]: 'true', [LABELS.node]: node, [LABELS.service]: serviceId, [LABELS.volume]: name };
}

/**
 * The container of one allocation on `release`: labelled with the allocation instead of a replica slot. With the
 * node's private address (routing.remote) the release's port is published there and nowhere else, on a free host
 * port Docker picks: other nodes' proxies dial it, the public interfaces never carry it.
 */
export function allocationContainerSpec(node: string, network: string, release: Release, allocationId: string, privateAddress: string | null = null): ContainerSpec {
  const spec = containerSpec(node, network, release, 0);
  const { [LABELS.replica]: _slot, ...labels } = spec.labels;
  const publish = privateAddress !== null && release.port !== null ? { publish: { [`${release.port}/tcp`]: { hostIp: privateAddress } } } : {};
  // A fenced release's containers say so on themselves: the fence finds them from Docker alone, with or without a set.
  const fence: Record<string, string> = release.fence === true ? { [LABELS.fence]: 'true' } : {};
  return { ...spec, name: allocationContainerName(node, release, allocationId), labels: { ...labels, [LABELS.allocation]: allocationId, ...fence }, ...publish };
}
