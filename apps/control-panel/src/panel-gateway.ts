import websocket from '@fastify/websocket';
import type { FastifyInstance } from 'fastify';
import { MAX_PAYLOAD_BYTES } from '@tether/protocol';
import { NodeAuthenticator } from './agent-gateway/authenticate.js';
import { agentGateway } from './agent-gateway/gateway.js';
import type { ConnectionCap } from './http/connection-cap.js';
import type { Slots } from './lifecycle.js';
import type { PanelMetrics } from './panel-metrics.js';
import type { AppDependencies, PanelParts } from './panel-parts.js';

/** The agent gateway, GET /v1/agent/connect: the agent side's sessions come in here. */
export async function registerAgentGateway(
  app: FastifyInstance,
  { deps, parts, metrics, connections, lifecycle }: { deps: AppDependencies; parts: PanelParts; metrics: PanelMetrics; connections: ConnectionCap; lifecycle: Slots },
): Promise<NodeAuthenticator> {
  const { config } = deps;
  const { agents, cluster } = parts;
  await app.register(websocket, { options: { maxPayload: MAX_PAYLOAD_BYTES, perMessageDeflate: false } });
  const s = config.sessions;
  const nodeAuth = new NodeAuthenticator(deps.prisma, s.nodeTokenCacheMs);
  parts.events.on('node.decommissioned', ({ nodeId }) => nodeAuth.forget(nodeId));
  await app.register(agentGateway, {
    prisma: deps.prisma,
    registry: agents.registry,
    frames: agents.frames,
    nodeAuth,
    metrics,
    ...(cluster ? { claim: (nodeId: string, sessionId: string) => cluster.claim(nodeId, sessionId) } : {}),
    protocolVersions: s.protocolVersions,
    maxOpening: s.maxOpening,
    connections,
    // The window a busy panel hints, in seconds: the opens it holds now at its planned rate (at least 1 s).
    busyRetryAfterS: () => Math.max(1, Math.ceil(s.maxOpening / s.restartOpensPerSec)),
    timing: {
      heartbeatIntervalMs: s.heartbeatIntervalMs,
      pingIntervalMs: s.pingIntervalMs,
      panelIdleTimeoutMs: s.idleTimeoutMs,
      agentIdleTimeoutMs: s.agentIdleTimeoutMs,
      ackTimeoutMs: s.ackTimeoutMs,
      helloTimeoutMs: s.helloTimeoutMs,
      sendBufferLimitBytes: s.sendBufferLimitBytes,
    },
    lifecycle,
    allocations: config.scheduler.allocations,
    certificates: parts.agents.certificates.enabled,
  });
  return nodeAuth;
}
