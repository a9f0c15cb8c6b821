import { usage } from '../errors.js';

// The service fields `tether deploy` can change before it deploys: the image,
// the process (command and args), the resource limits, the volumes, the drain and the rollout. Each
// flag becomes a field of one PATCH /v1/services/:id; the panel validates
// them (and answers INVALID_VOLUME, VOLUME_NEEDS_ONE_REPLICA, … as API errors).

export interface ServiceChangeOptions {
  image?: string;
  /** --command, repeated: one argument each (replaces the image's ENTRYPOINT). */
  command?: string[];
  /** --arg, repeated: one argument each (replaces the image's CMD). */
  arg?: string[];
  cpus?: string;
  memory?: string;
  /** --volume name:/path[:ro], repeated: the service's whole list of volumes. */
  volume?: string[];
  /** --drain-seconds N: how long old containers keep their connections after a rollout's switch. */
  'drain-seconds'?: string;
  /** --max-surge, --max-unavailable, --progress-deadline: the service's whole rollout (a flag left out: its default). */
  'max-surge'?: string;
  'max-unavailable'?: string;
  'progress-deadline'?: string;
}

export interface ServiceChanges {
  image?: string;
  command?: string[];
  args?: string[];
  resources?: { cpus?: number; memoryMiB?: number };
  volumes?: { name: string; mountPath: string; readOnly: boolean }[];
  drainSeconds?: number;
  rollout?: { maxSurge?: number; maxUnavailable?: number; progressDeadlineSeconds?: number };
}

/** A whole number within bounds, or a usage error naming the flag. */
function wholeNumber(flag: string, value: string, min: number, max: number, what: string): number {
  if (!/^\d+$/.test(value) || Number(value) < min || Number(value) > max) throw usage(`--${flag} takes ${what}, ${min}-${max}`);
  return Number(value);
}

function volumeOf(flag: string): { name: string; mountPath: string; readOnly: boolean } {
  const match = /^([^:]+):(\/[^:]*)(?::(ro|rw))?$/.exec(flag);
  if (!match) throw usage(`--volume takes name:/absolute/path[:ro], not ${JSON.stringify(flag)}`);
  return { name: match[1]!, mountPath: match[2]!, readOnly: match[3] === 'ro' };
}

/** The PATCH body the flags ask for; empty when none was given. */
export function serviceChanges(options: ServiceChangeOptions): ServiceChanges {
  const changes: ServiceChanges = {};
  if (options.image !== undefined) {
    if (!options.image) throw usage('--image needs an image reference');
    changes.image = options.image;
  }
  if (options.command !== undefined) changes.command = options.command;
  if (options.arg !== undefined) changes.args = options.arg;
  const resources: NonNullable<ServiceChanges['resources']> = {};
  if (options.cpus !== undefined) {
    const cpus = Number(options.cpus);
    if (!/^\d+(\.\d+)?$/.test(options.cpus) || !(cpus >= 0.01 && cpus <= 1024)) throw usage('--cpus takes a number of CPUs, 0.01-1024');
    resources.cpus = cpus;
  }
  if (options.memory !== undefined) {
    const mib = Number(options.memory);
    if (!/^\d+$/.test(options.memory) || mib < 6 || mib > 4_194_304) throw usage('--memory takes whole MiB, 6-4194304');
    resources.memoryMiB = mib;
  }
  if (Object.keys(resources).length > 0) changes.resources = resources;
  if (options.volume !== undefined) changes.volumes = options.volume.map(volumeOf);
  const drain = options['drain-seconds'];
  if (drain !== undefined) changes.drainSeconds = wholeNumber('drain-seconds', drain, 0, 3600, 'whole seconds');
  const rollout: NonNullable<ServiceChanges['rollout']> = {};
  if (options['max-surge'] !== undefined) rollout.maxSurge = wholeNumber('max-surge', options['max-surge'], 0, 100, 'a number of replicas');
  if (options['max-unavailable'] !== undefined) rollout.maxUnavailable = wholeNumber('max-unavailable', options['max-unavailable'], 0, 100, 'a number of replicas');
  if (options['progress-deadline'] !== undefined) rollout.progressDeadlineSeconds = wholeNumber('progress-deadline', options['progress-deadline'], 1, 86_400, 'whole seconds');
  if (Object.keys(rollout).length > 0) changes.rollout = rollout;
  return changes;
}

/** What the changes say, for the line printed before the deployment. */
export function describeChanges(c: ServiceChanges): string {
  return [
    c.image === undefined ? null : `image ${c.image}`,
    c.command === undefined ? null : `command ${JSON.stringify(c.command)}`,
    c.args === undefined ? null : `args ${JSON.stringify(c.args)}`,
    c.resources === undefined ? null : `resources ${JSON.stringify(c.resources)}`,
    c.drainSeconds === undefined ? null : `drain ${c.drainSeconds}s`,
    c.rollout === undefined ? null : `rollout ${JSON.stringify(c.rollout)}`,
    c.volumes === undefined ? null : `volumes ${c.volumes.map((v) => `${v.name}:${v.mountPath}${v.readOnly ? ':ro' : ''}`).join(', ') || 'none'}`,
  ]
    .filter((part) => part !== null)
    .join(', ');
}
