import type { ContainerState } from '@tether/protocol';
import type { SessionRegistry } from './registry.js';

// Status is computed from live sessions only. Every answer carries its
// evidence (which session, how old its last frame and the report are); a node
// without a live session makes its services `unknown`, never `running`.

export type ServiceState = 'running' | 'degraded' | 'down' | 'stopped' | 'unknown';

export interface StatusInput {
  id: string;
  name: string;
  teamId: string;
  replicas: number;
  node: { id: string; name: string; unreachableSince: Date | null; lastTeardownReason: string | null };
}

export interface ServiceStatus {
  serviceId: string;
  name: string;
  teamId: string;
  node: { id: string; name: string };
  state: ServiceState;
  desiredReplicas: number;
  runningReplicas: number | null;
  reason: string;
  containers: ContainerState[];
  evidence: { sessionId: string; lastFrameAgeMs: number; reportAgeMs: number } | null;
}

export function serviceStatus(service: StatusInput, registry: SessionRegistry, now = Date.now()): ServiceStatus {
  const base = {
    serviceId: service.id,
    name: service.name,
    teamId: service.teamId,
    node: { id: service.node.id, name: service.node.name },
    desiredReplicas: service.replicas,
  };
  const session = registry.get(service.node.id);
  if (!session || !session.report) {
    const teardown = registry.lastTeardown(service.node.id);
    const since = teardown ? new Date(teardown.at) : service.node.unreachableSince;
    const why = teardown?.reason ?? service.node.lastTeardownReason;
    const reason = since
      ? `node ${service.node.name} unreachable since ${since.toISOString()}${why ? ` (${why})` : ''}`
      : `node ${service.node.name} has not connected yet`;
    return { ...base, state: 'unknown', runningReplicas: null, reason, containers: [], evidence: null };
  }
  const report = session.report;
  const evidence = { sessionId: session.id, lastFrameAgeMs: now - session.lastFrameAt, reportAgeMs: now - report.at };
  if (!report.runtime.available) {
    const reason = `container runtime unavailable on node ${service.node.name}: ${report.runtime.error ?? 'no detail'}`;
    return { ...base, state: 'unknown', runningReplicas: null, reason, containers: [], evidence };
  }
  const containers = report.containers.filter((c) => c.serviceId === service.id);
  const running = containers.filter((c) => c.state === 'running' && c.health !== 'unhealthy').length;
  let state: ServiceState;
  if (service.replicas === 0) state = running === 0 ? 'stopped' : 'degraded';
  else if (running >= service.replicas) state = 'running';
  else state = running === 0 ? 'down' : 'degraded';
  const reason = `${running}/${service.replicas} running, reported by session ${session.id}`;
  return { ...base, state, runningReplicas: running, reason, containers, evidence };
}
