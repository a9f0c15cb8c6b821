import { hasWritableVolume } from '@tether/protocol';
import { AppError } from '../errors.js';
import { DEFAULT_ROLLOUT, type ServiceHealthCheck, type ServiceResources, type ServiceRollout, type ServiceVolume } from '../db/deployment-spec.js';
import { rolloutLimits, rolloutOptionsOf } from '../scheduling/rollout-plan.js';

// The rules of a service's command, resources and volumes beyond their JSON
// shape (the HTTP schema checks that): volume names, mount paths, and what a
// writable volume implies. Every refusal is a catalogued code.

export const MAX_VOLUMES = 10;
const MAX_MOUNT_PATH = 1024;
const VOLUME_NAME = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/** A volume as the API takes it (`readOnly` optional). */
export interface VolumeInput {
  name: string;
  mountPath: string;
  readOnly?: boolean;
}

const invalid = (message: string) => new AppError('INVALID_VOLUME', message);

/**
 * Checks and normalises volumes: a name is a label the service owns (never a
 * host path, the Docker socket or another service's volume: those are not
 * labels), unique per service; a mount path is absolute, without `..` or
 * control characters, not `/`, unique per service.
 */
export function normaliseVolumes(input: readonly VolumeInput[]): ServiceVolume[] {
  if (input.length > MAX_VOLUMES) throw invalid(`a service has at most ${MAX_VOLUMES} volumes, not ${input.length}`);
  const names = new Set<string>();
  const paths = new Set<string>();
  return input.map((v) => {
    if (!VOLUME_NAME.test(v.name)) {
      throw invalid(`volume name ${JSON.stringify(v.name.slice(0, 80))} is not a lowercase RFC 1123 label: Tether mounts only named volumes it owns, never host paths`);
    }
    if (names.has(v.name)) throw invalid(`volume ${v.name} is named twice`);
    names.add(v.name);
    const path = v.mountPath;
    if (!path.startsWith('/') || path.length > MAX_MOUNT_PATH) throw invalid(`mountPath of volume ${v.name} must be an absolute path of at most ${MAX_MOUNT_PATH} characters`);
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u001f\u007f]/.test(path)) throw invalid(`mountPath of volume ${v.name} holds a control character`);
    const segments = path.split('/').filter((s) => s !== '');
    if (segments.some((s) => s === '..')) throw invalid(`mountPath of volume ${v.name} must not hold ".."`);
    if (segments.length === 0) throw invalid(`volume ${v.name} cannot be mounted at /`);
    const normal = `/${segments.join('/')}`;
    if (paths.has(normal)) throw invalid(`two volumes are mounted at ${normal}`);
    paths.add(normal);
    return { name: v.name, mountPath: normal, readOnly: v.readOnly ?? false };
  });
}

/** Two containers must never write one volume at once: a writable volume means 0 or 1 replicas. */
export function checkReplicasWithVolumes(replicas: number, volumes: readonly ServiceVolume[]): void {
  if (replicas > 1 && hasWritableVolume({ volumes: [...volumes] })) {
    throw new AppError('VOLUME_NEEDS_ONE_REPLICA', `a service with a writable volume runs 0 or 1 replicas, not ${replicas}: mount it readOnly or scale down`);
  }
}

/** `rollout` as stored: a field left out (or the whole object null) is its default. */
export function normaliseRollout(input: Partial<ServiceRollout> | null | undefined): ServiceRollout | undefined {
  if (input === undefined) return undefined;
  return { ...DEFAULT_ROLLOUT, ...Object.fromEntries(Object.entries(input ?? {}).filter(([, v]) => v !== undefined)) };
}

/**
 * A rollout the scheduler could carry out: not both limits 0, and no surge for a service with a writable volume or
 * failover.fence (rolloutLimits, the scheduler's own check). 400 VALIDATION_FAILED with `details.field`.
 */
export function checkRollout(rollout: ServiceRollout, volumes: readonly ServiceVolume[], fence: boolean): void {
  rolloutLimits({ stateful: hasWritableVolume({ volumes: [...volumes] }), fenced: fence }, rolloutOptionsOf(rollout));
}

/** Resources as stored: only the limits given; none given is no limits (null). */
export function normaliseResources(input: ServiceResources | null | undefined): ServiceResources | null | undefined {
  if (input === undefined || input === null) return input;
  const out: ServiceResources = {
    ...(input.cpus === undefined ? {} : { cpus: input.cpus }),
    ...(input.memoryMiB === undefined ? {} : { memoryMiB: input.memoryMiB }),
  };
  return Object.keys(out).length === 0 ? null : out;
}

/** A health check as the API takes it: `path` required, every other field defaulted. */
export interface HealthCheckInput {
  path: string;
  port?: number | null;
  intervalSeconds?: number;
  timeoutSeconds?: number;
  healthyThreshold?: number;
  unhealthyThreshold?: number;
  startPeriodSeconds?: number;
}

export const HEALTH_CHECK_DEFAULTS = Object.freeze({ intervalSeconds: 5, timeoutSeconds: 2, healthyThreshold: 1, unhealthyThreshold: 3, startPeriodSeconds: 0 });

/** The check as stored, defaults filled; null clears it, undefined leaves it as it is. */
export function normaliseHealthCheck(input: HealthCheckInput | null | undefined): ServiceHealthCheck | null | undefined {
  if (input === undefined || input === null) return input;
  return {
    path: input.path,
    port: input.port ?? null,
    intervalSeconds: input.intervalSeconds ?? HEALTH_CHECK_DEFAULTS.intervalSeconds,
    timeoutSeconds: input.timeoutSeconds ?? HEALTH_CHECK_DEFAULTS.timeoutSeconds,
    healthyThreshold: input.healthyThreshold ?? HEALTH_CHECK_DEFAULTS.healthyThreshold,
    unhealthyThreshold: input.unhealthyThreshold ?? HEALTH_CHECK_DEFAULTS.unhealthyThreshold,
    startPeriodSeconds: input.startPeriodSeconds ?? HEALTH_CHECK_DEFAULTS.startPeriodSeconds,
  };
}

/** The agent probes a port: the check's own or the service's internalPort. */
export function checkHealthCheckPort(check: ServiceHealthCheck | null, internalPort: number | null): void {
  if (check && check.port === null && internalPort === null) {
    throw new AppError('HEALTHCHECK_NEEDS_PORT', `health check ${check.path} has no port to probe: give the service an internalPort or the check a port`);
  }
}
