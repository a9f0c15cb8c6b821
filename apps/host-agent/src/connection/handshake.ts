import { sanitizeText } from '@tether/common';
import { CAPABILITIES, FIELD_LIMITS, type RouteProbe, type RoutingStatus, type RuntimeStatus } from '@tether/protocol';
import type { PendingEvents, RoutingController, WorkloadController } from '../controllers.js';
import type { LogStreams } from '../logs/index.js';

// What the agent says about itself: the capabilities hello announces, and the
// free text of every frame, sanitised on the way out.

/**
 * Free text leaves the agent sanitised: a reason may carry a crashed
 * container's last output, which can hold any bytes (a NUL would make the
 * panel's database refuse the row).
 */
export const freeText = (text: string) => sanitizeText(text, { maxLength: FIELD_LIMITS.text });

export const runtimeStatus = (status: RuntimeStatus): RuntimeStatus => ({ ...status, error: status.error === null ? null : freeText(status.error) });

const nullableText = (text: string | null) => (text === null ? null : freeText(text));
/** A probe's error and its certificate's issuer and error come from the network: sanitised like every free text. */
const probeText = (p: RouteProbe): RouteProbe => ({
  ...p,
  error: nullableText(p.error),
  ...(p.certificate ? { certificate: { ...p.certificate, issuer: nullableText(p.certificate.issuer), lastError: nullableText(p.certificate.lastError) } } : {}),
});

export const routingStatus = (status: RoutingStatus): RoutingStatus => ({
  ...status,
  lastReloadReason: status.lastReloadReason === null ? null : freeText(status.lastReloadReason),
  ...(status.probes ? { probes: status.probes.map(probeText) } : {}),
});

type Parts = { events?: PendingEvents; logs?: LogStreams; routing: RoutingController; workloads: WorkloadController; fence?: { afterMs: number } };

/**
 * The private address hello names with `routing.remote`, or null when the agent does not announce it: cross-node
 * routing takes all three, ports published on that address (allocations: nothing else publishes) and answers that
 * can name them (the static proxy, whose answerer is what other nodes' endpoints go into).
 */
export function remoteRoutingAddress(parts: Pick<Parts, 'routing' | 'workloads'>): string | null {
  const { privateAddress, capabilities } = parts.workloads;
  return privateAddress && capabilities?.includes(CAPABILITIES.WORKLOAD_ALLOCATIONS) && parts.routing.answerer ? privateAddress : null;
}

/**
 * hello.challengePort, or null when the agent does not announce certificates.share: that takes routing.remote (the
 * issuer is reached at its private address) and a proxy that orders from an ACME CA and can share what it gets.
 */
export function challengePort(parts: Pick<Parts, 'routing' | 'workloads'>): number | null {
  return remoteRoutingAddress(parts) && parts.routing.certificateSharing ? parts.routing.certificateSharing.challengePort : null;
}

/**
 * workload.fence is announced (with hello.fence) when the agent has a fence deadline and runs allocations through
 * workloads that can stop fenced containers: fenced releases travel only in `allocations` sets.
 */
export function fenceAnnounced(parts: Pick<Parts, 'workloads' | 'fence'>): boolean {
  return parts.fence !== undefined && parts.workloads.setFenced !== undefined && (parts.workloads.capabilities?.includes(CAPABILITIES.WORKLOAD_ALLOCATIONS) ?? false);
}

/** The optional features this agent was built with, as hello announces them. */
export function agentCapabilities(parts: Parts): string[] {
  return [
    ...(parts.events ? [CAPABILITIES.PROXY_EVENTS] : []),
    ...(parts.logs ? [CAPABILITIES.LOGS] : []),
    // Every proxy the agent runs is the static one, and only a proxy has an answerer.
    ...(parts.routing.answerer ? [CAPABILITIES.PROXY_STATIC] : []),
    ...(parts.routing.probesRoutes ? [CAPABILITIES.ROUTES_PROBE] : []),
    ...(parts.workloads.capabilities ?? []),
    ...(remoteRoutingAddress(parts) ? [CAPABILITIES.ROUTING_REMOTE] : []),
    ...(challengePort(parts) !== null ? [CAPABILITIES.CERTIFICATES_SHARE] : []),
    ...(fenceAnnounced(parts) ? [CAPABILITIES.WORKLOAD_FENCE] : []),
    // Built in: every workload's secrets become its container's environment (runtime/workload-spec.ts).
    CAPABILITIES.SECRETS,
  ];
}
