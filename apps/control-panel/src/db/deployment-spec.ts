import { CAPABILITIES, rollsOutWithoutOverlap, type Workload } from '@tether/protocol';

/** A secret version a deployment recorded: its name and version, never its value. */
export interface SecretRef {
  name: string;
  version: number;
}

/** A workload as the panel holds it: the secret versions and the registry to send, not their values (secrets/secret-delivery.ts joins them). */
export type PlannedWorkload = Workload & { secretRefs?: SecretRef[]; registryRef?: { id: string; host: string } };

// What a deployment row carries out: a snapshot of its service's spec, stored
// as JSON in deployments.spec (the REST side writes it, the agent side reads it).

export interface ServiceSpec {
  name: string;
  image: string;
  env: Record<string, string>;
  internalPort: number | null;
  replicas: number;
  /** The secret versions the deployment runs with (names and versions, never values); absent on older rows. */
  secrets?: { name: string; version: number }[];
  /** The team's registry for the image's host when the deployment was made (id and host, never the password); absent: none. */
  registry?: { id: string; host: string };
  // Absent in rows written before they existed: read them as null / [].
  /** Replaces the image's ENTRYPOINT; null: the image's. */
  command?: string[] | null;
  /** Replaces the image's CMD; null: the image's (Docker clears it when `command` is set). */
  args?: string[] | null;
  resources?: ServiceResources | null;
  volumes?: ServiceVolume[];
  /** The HTTP health check, defaults filled; null: none (the image's HEALTHCHECK or min-ready time decide). */
  healthCheck?: ServiceHealthCheck | null;
  /** Seconds the old containers keep their open connections after the switch; absent in older rows: the default. */
  drainSeconds?: number;
  /** Failover settings (issue 38); absent in older rows: not fenced. */
  failover?: ServiceFailover;
  /** Rollout settings (issue 36); absent in older rows, or a field null: the default. */
  rollout?: ServiceRollout;
}

/**
 * `rollout` (issue 36), as Kubernetes' strategy.rollingUpdate and progressDeadlineSeconds: replicas a rollout of a
 * service managed by allocations may run above (maxSurge) and below (maxUnavailable) the wanted count, and how long
 * it may go without a step. null: the default (1 and 0, or 0 and 1 with a writable volume or failover.fence; the
 * panel's TETHER_PROGRESS_DEADLINE_SECONDS).
 */
export interface ServiceRollout {
  maxSurge: number | null;
  maxUnavailable: number | null;
  progressDeadlineSeconds: number | null;
}

/** A service without rollout settings: every one its default. */
export const DEFAULT_ROLLOUT: ServiceRollout = { maxSurge: null, maxUnavailable: null, progressDeadlineSeconds: null };

/** `failover.fence`: work that must never run twice (capability workload.fence on its agents). */
export interface ServiceFailover {
  fence: boolean;
}

/** A service's drainSeconds when none is given, and what an agent without `workload.drain` does on its own (docs/api.md). */
export const DEFAULT_DRAIN_SECONDS = 30;

export interface ServiceHealthCheck {
  path: string;
  /** null: the service's internalPort. */
  port: number | null;
  intervalSeconds: number;
  timeoutSeconds: number;
  healthyThreshold: number;
  unhealthyThreshold: number;
  startPeriodSeconds: number;
}

export interface ServiceResources {
  cpus?: number;
  memoryMiB?: number;
}

export interface ServiceVolume {
  name: string;
  mountPath: string;
  readOnly: boolean;
}

/** The workload's health check, its port resolved (the edge refuses a check without one: HEALTHCHECK_NEEDS_PORT). */
function healthCheckOf(spec: ServiceSpec): Pick<Workload, 'healthCheck'> {
  const check = spec.healthCheck;
  const port = check ? (check.port ?? spec.internalPort) : null;
  if (!check || port === null) return {};
  return { healthCheck: { ...check, port } };
}

/** What the agent is sent for a deployment of a service's spec snapshot (secrets by reference: values join only the frame). */
export function workloadOf(serviceId: string, deploymentId: string, spec: ServiceSpec): PlannedWorkload {
  const workload: Workload = {
    serviceId,
    serviceName: spec.name,
    deploymentId,
    image: spec.image,
    env: spec.env,
    port: spec.internalPort,
    replicas: spec.replicas,
    // Each optional field only when set: a workload without them needs no capability (protocol's workloadCapabilities).
    ...(spec.command ? { command: spec.command } : {}),
    ...(spec.args ? { args: spec.args } : {}),
    ...(spec.resources ? { resources: spec.resources } : {}),
    ...(spec.volumes && spec.volumes.length > 0 ? { volumes: spec.volumes } : {}),
    ...healthCheckOf(spec),
    drainSeconds: spec.drainSeconds ?? DEFAULT_DRAIN_SECONDS,
    ...(spec.failover?.fence ? { fence: true as const } : {}),
  };
  return {
    ...workload,
    ...(spec.secrets && spec.secrets.length > 0 ? { secretRefs: spec.secrets } : {}),
    ...(spec.registry ? { registryRef: spec.registry } : {}),
  };
}

/**
 * A release of an `allocations` set (a service managed by allocations): the workload, with `stopFirst` when the
 * deployment's rollout says maxSurge 0 for a service whose containers may otherwise overlap (capability
 * workload.stop-first: its agent stops the old container before the new one starts). A writable volume or a fence
 * stops first already and needs no field.
 */
export function releaseOf(serviceId: string, deploymentId: string, spec: ServiceSpec): PlannedWorkload {
  const workload = workloadOf(serviceId, deploymentId, spec);
  return spec.rollout?.maxSurge === 0 && !rollsOutWithoutOverlap(workload) ? { ...workload, stopFirst: true } : workload;
}

/**
 * The workload as a session's agent is sent it. `drainSeconds` goes only to an agent that announced
 * `workload.drain`; to another the default is left out (it drains its own way, which the default stands for),
 * and any other value stays, so the capability check refuses the workload (AGENT_LACKS_CAPABILITY) rather than
 * run it without its drain.
 */
export function forAgent<W extends Workload>(session: { hasCapability(capability: string): boolean }, workload: W): W {
  if (workload.drainSeconds !== DEFAULT_DRAIN_SECONDS || session.hasCapability(CAPABILITIES.WORKLOAD_DRAIN)) return workload;
  const { drainSeconds: _default, ...rest } = workload;
  return rest as W;
}
