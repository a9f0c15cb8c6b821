import { errorMessage, sanitizeText } from '@tether/common';
import { CAPABILITIES, type DeployResult, CLOSE_CODES, DEFAULT_PROTOCOL_RANGE, FRAME_ERROR_CODES, FIELD_LIMITS, versionBelow, type ErrorMessage, type Hello, type ProtocolRange, type RouteProbe, type RoutingStatus, type RuntimeStatus } from '@tether/protocol';
import type { DeployOutcome, PendingEvents, RoutingController, WorkloadController } from '../controllers.js';
import type { LogStreams } from '../logs/index.js';

// What the agent says about itself: hello, the capabilities it announces, the
// protocol version it says (stepping down when a panel refuses it), and the
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

/** The agent's hello: who it is, what runs (read now), what routing is in place, what it announces. */
export async function helloFrame(
  parts: Parts & { nodeName: string; agentVersion: string; fence?: { afterMs: number; stopTimeoutMs: number }; fenced: boolean },
  id: string,
  protocolVersion: number,
): Promise<Hello> {
  const observation = await parts.workloads.observe().catch((err: unknown) => ({
    containers: [],
    runtime: { available: false, error: errorMessage(err) },
  }));
  const privateAddress = remoteRoutingAddress(parts);
  const port = challengePort(parts);
  return {
    type: 'hello',
    id,
    node: parts.nodeName,
    agentVersion: parts.agentVersion,
    protocolVersion,
    containers: observation.containers,
    runtime: runtimeStatus(observation.runtime),
    routing: routingStatus(parts.routing.status()),
    capabilities: agentCapabilities(parts),
    ...(privateAddress ? { privateAddress } : {}),
    ...(port !== null ? { challengePort: port } : {}),
    ...(parts.fenced && parts.fence ? { fence: parts.fence } : {}),
  };
}

/**
 * The protocol version each connection's hello says (docs/protocol.md, "Versions"): the highest this agent speaks
 * (TETHER_PROTOCOL_VERSION_MAX), unless the last connection was refused for its version; then the next lower one,
 * at once. An upgraded panel is found without a restart, an old one costs one refused upgrade per reconnect.
 */
export class ProtocolVersions {
  /** The version this connection's hello says. */
  current: number;
  private stepDownTo: number | null = null;
  /** The panel answered this connection's hello with UNSUPPORTED_PROTOCOL_VERSION. */
  private refused = false;

  constructor(private readonly range: ProtocolRange = DEFAULT_PROTOCOL_RANGE) {
    this.current = range.max;
  }

  /** A new connection: the version its hello says. */
  begin(): number {
    this.current = this.stepDownTo ?? this.range.max;
    this.stepDownTo = null;
    this.refused = false;
    return this.current;
  }

  /** An error before welcome (the only frame sent is hello): true when it refused hello's version. */
  error(message: ErrorMessage): void {
    if (message.code === FRAME_ERROR_CODES.UNSUPPORTED_PROTOCOL_VERSION) this.refused = true;
  }

  /**
   * The socket closed: whether this connection was refused for its version (never one that had a session), and the
   * lower version the next says at once (null: none lower; refused at the oldest, only an operator can help).
   */
  closed(code: number, hadSession: boolean): { refused: boolean; lower: number | null } {
    const refused = !hadSession && (this.refused || code === CLOSE_CODES.UNSUPPORTED_PROTOCOL_VERSION);
    const lower = refused ? versionBelow(this.range, this.current) : null;
    if (lower !== null) this.stepDownTo = lower;
    return { refused, lower };
  }
}

/** A deployment's outcome as `deploy.result` says it. */
export function resultFrame(id: string, deploymentId: string, outcome: DeployOutcome): DeployResult {
  return {
    type: 'deploy.result',
    id,
    deploymentId,
    status: outcome.status,
    reason: freeText(outcome.reason),
    code: outcome.status === 'failed' ? outcome.code : null,
    ...(outcome.status === 'running' && outcome.imageRef ? { imageRef: outcome.imageRef } : {}),
  };
}
