import { CAPABILITIES, type Capability } from './constants.js';
import type { Release, Workload } from './messages.js';

/**
 * The capabilities an agent must have announced to run `workload` (or a release of an `allocations` set) as it is:
 * one per optional field that is present. A field an older agent would
 * silently ignore must never reach it (the panel fails the deployment instead).
 */
export function workloadCapabilities(workload: Release): Capability[] {
  const needed: Capability[] = [];
  if (workload.command !== undefined || workload.args !== undefined) needed.push(CAPABILITIES.WORKLOAD_COMMAND);
  if (workload.resources !== undefined) needed.push(CAPABILITIES.WORKLOAD_RESOURCES);
  if (workload.volumes !== undefined && workload.volumes.length > 0) needed.push(CAPABILITIES.WORKLOAD_VOLUMES);
  if (workload.healthCheck !== undefined) needed.push(CAPABILITIES.WORKLOAD_HEALTH_CHECK);
  if (workload.drainSeconds !== undefined) needed.push(CAPABILITIES.WORKLOAD_DRAIN);
  if (workload.fence === true) needed.push(CAPABILITIES.WORKLOAD_FENCE);
  if (workload.stopFirst === true) needed.push(CAPABILITIES.WORKLOAD_STOP_FIRST);
  return needed;
}

/** True when a container of `workload` writes to a volume: its replicas must never overlap (stop the old one first). */
export function hasWritableVolume(workload: Pick<Workload, 'volumes'>): boolean {
  return (workload.volumes ?? []).some((v) => !v.readOnly);
}

/**
 * True when a rollout of `workload` must stop the old container before the new one starts (maxSurge 0): a
 * writable volume (two containers never share its data), a fenced release (work that must never run twice), or a
 * release that asks for it (`stopFirst`: its service's rollout.maxSurge is 0).
 */
export function rollsOutWithoutOverlap(workload: Pick<Workload, 'volumes' | 'fence' | 'stopFirst'>): boolean {
  return hasWritableVolume(workload) || workload.fence === true || workload.stopFirst === true;
}
