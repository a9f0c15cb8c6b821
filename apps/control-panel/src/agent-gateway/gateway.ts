import type { FastifyPluginAsync } from 'fastify';
import { sanitizeText, truncate } from '@tether/common';
import type { RawData, WebSocket } from 'ws';
import {
  CAPABILITIES,
  CLOSE_CODES,
  FRAME_ERROR_CODES,
  FIELD_LIMITS,
  MAX_INVALID_STREAK,
  createIdGenerator,
  decode,
  encode,
  type AgentMessage,
  type FrameError,
  type Hello,
  type Timing,
} from '@tether/protocol';
import type { Db } from '../db/database.js';
import type { PanelMetrics } from '../panel-metrics.js';
import { AgentSession, closeHard, type SessionTiming } from '../sessions/session.js';
import type { SessionRegistry } from '../sessions/registry.js';
import { authenticateNode, type AuthenticatedNode } from './authenticate.js';

// GET /v1/agent/connect: authenticate before the upgrade, require `hello`
// within the hello timeout, answer `welcome`, then hand every valid frame of
// the session to the registry. Invalid frames get an `error` reply; a run of
// them closes the session with PROTOCOL_ERROR. Nothing an agent sends can
// crash the panel or disturb another session.

export interface GatewayOptions {
  prisma: Db;
  registry: SessionRegistry;
  metrics?: PanelMetrics;
  timing: Timing & { helloTimeoutMs: number; sendBufferLimitBytes: number };
  /**
   * Claims the node for a new session before `welcome` (ownership/cluster.ts); a rejection closes the
   * session with GOING_AWAY (the agent backs off and may reach another panel). Absent: no claim.
   */
  claim?: (nodeId: string, sessionId: string) => Promise<unknown>;
}

const AGENT_TYPES = new Set(['heartbeat', 'pong', 'ack', 'deploy.result', 'routing.applied', 'proxy.events', 'logs.chunk', 'logs.end', 'error']);
/** Optional protocol features this panel speaks (docs/protocol.md, "Capabilities"). */
const PANEL_CAPABILITIES: ReadonlySet<string> = new Set(Object.values(CAPABILITIES));

declare module 'fastify' {
  interface FastifyRequest {
    agentNode?: AuthenticatedNode;
  }
}

export const agentGateway: FastifyPluginAsync<GatewayOptions> = async (app, opts) => {
  const nextId = createIdGenerator('p');
  const sessionTiming: SessionTiming = {
    idleTimeoutMs: opts.timing.panelIdleTimeoutMs,
    ackTimeoutMs: opts.timing.ackTimeoutMs,
    sendBufferLimitBytes: opts.timing.sendBufferLimitBytes,
  };
  const welcomeTiming: Timing = {
    heartbeatIntervalMs: opts.timing.heartbeatIntervalMs,
    pingIntervalMs: opts.timing.pingIntervalMs,
    panelIdleTimeoutMs: opts.timing.panelIdleTimeoutMs,
    agentIdleTimeoutMs: opts.timing.agentIdleTimeoutMs,
    ackTimeoutMs: opts.timing.ackTimeoutMs,
  };

  const reject = (socket: WebSocket, error: FrameError) => {
    opts.metrics?.invalidFrames.inc({ code: error.code });
    socket.send(encode({ type: 'error', id: nextId(), ref: error.ref, code: error.code, message: truncate(error.message, FIELD_LIMITS.text) }));
  };

  app.get(
    '/v1/agent/connect',
    {
      websocket: true,
      schema: { hide: true },
      preValidation: async (request) => {
        request.agentNode = await authenticateNode(opts.prisma, request);
      },
    },
    (socket, request) => {
      const node = request.agentNode!;
      const peer = `${request.socket.remoteAddress}:${request.socket.remotePort}`;
      const log = request.log.child({ node: node.name, nodeId: node.id, peer });
      let session: AgentSession | undefined;
      let preHelloInvalid = 0;

      const helloTimer = setTimeout(() => {
        log.warn({ helloTimeoutMs: opts.timing.helloTimeoutMs }, 'no hello in time');
        closeHard(socket, CLOSE_CODES.HELLO_TIMEOUT, `no hello within ${opts.timing.helloTimeoutMs} ms`);
      }, opts.timing.helloTimeoutMs);
      helloTimer.unref();

      const protocolError = (message: string) => {
        if (session) session.teardown(CLOSE_CODES.PROTOCOL_ERROR, message);
        else {
          clearTimeout(helloTimer);
          closeHard(socket, CLOSE_CODES.PROTOCOL_ERROR, message);
        }
      };

      let claiming = false;
      const onHello = async (hello: Hello) => {
        clearTimeout(helloTimer);
        if (hello.node !== node.name) log.warn({ reported: hello.node }, 'hello names another node than the token; the token decides');
        // Until the claim commits the session is not in the registry, and its teardown records nothing.
        let admitted = false;
        const s = new AgentSession(socket, node.id, node.name, peer, hello.agentVersion, sessionTiming, (x, code, reason) => {
          if (admitted) opts.registry.onTeardown(x, code, reason);
        });
        if (opts.claim) {
          claiming = true;
          try {
            await opts.claim(node.id, s.id);
          } catch (err) {
            log.warn({ err }, 'could not claim the node; session refused');
            s.teardown(CLOSE_CODES.GOING_AWAY, 'this panel cannot claim the node now; reconnect');
            return;
          } finally {
            claiming = false;
          }
          if (s.closed || socket.readyState !== socket.OPEN) return void s.teardown(CLOSE_CODES.GOING_AWAY, 'closed while claiming');
        }
        admitted = true;
        session = s;
        session.recordHello(hello.containers, hello.runtime, hello.routing);
        // Agents without the list (older ones) get none and no `capabilities` field, as before.
        const capabilities = hello.capabilities ? [...new Set(hello.capabilities)].filter((c) => PANEL_CAPABILITIES.has(c)) : null;
        session.setCapabilities(capabilities ?? []);
        session.send({
          type: 'welcome',
          id: nextId(),
          ref: hello.id,
          sessionId: session.id,
          nodeId: node.id,
          timing: welcomeTiming,
          ...(capabilities ? { capabilities } : {}),
        });
        opts.registry.open(session);
      };

      socket.on('message', (data: RawData, isBinary: boolean) => {
        const result = decode(data, { binary: isBinary });
        if (!result.ok) {
          reject(socket, result.error);
          if (result.error.code === FRAME_ERROR_CODES.UNSUPPORTED_PROTOCOL_VERSION) return protocolError(result.error.message);
          if (session) {
            const streak = session.recordInvalid();
            if (streak >= MAX_INVALID_STREAK) protocolError(`${streak} invalid frames in a row`);
          } else if (++preHelloInvalid >= MAX_INVALID_STREAK) protocolError(`${preHelloInvalid} invalid frames before hello`);
          return;
        }
        const message = result.message;
        if (claiming) return; // frames before welcome: an agent sends none
        if (!session) {
          if (message.type === 'hello') return void onHello(message);
          reject(socket, { code: FRAME_ERROR_CODES.UNEXPECTED_MESSAGE, message: `expected hello, got ${message.type}`, ref: message.id });
          return protocolError(`first frame must be hello, got ${message.type}`);
        }
        if (session.closed) return;
        if (!AGENT_TYPES.has(message.type) || (message.type === 'proxy.events' && !session.hasCapability(CAPABILITIES.PROXY_EVENTS))) {
          const streak = session.recordInvalid();
          reject(socket, { code: FRAME_ERROR_CODES.UNEXPECTED_MESSAGE, message: `${message.type} is not accepted from an agent here`, ref: message.id });
          if (streak >= MAX_INVALID_STREAK) protocolError(`${streak} invalid frames in a row`);
          return;
        }
        session.touch();
        handle(session, message as AgentMessage);
      });

      const handle = (s: AgentSession, message: AgentMessage) => {
        switch (message.type) {
          case 'heartbeat':
            s.recordHeartbeat(message.seq, message.containers, message.runtime, message.routing);
            break;
          case 'pong':
            s.recordPong();
            break;
          case 'ack':
            if (!s.acknowledge(message.ref)) log.debug({ ref: message.ref }, 'ack nobody waits for');
            break;
          case 'error':
            log.warn({ code: message.code, ref: message.ref, agentMessage: sanitizeText(message.message) }, 'agent rejected a frame');
            break;
          default:
            break;
        }
        opts.registry.received(s, message);
      };

      socket.on('close', (code: number, reason: Buffer) => {
        clearTimeout(helloTimer);
        // The close reason is the agent's free text and ends up in a session_events row: sanitised, bounded.
        const text = reason.length ? `: ${sanitizeText(reason, { keepNewlines: false, maxLength: 120 })}` : '';
        session?.teardown(code, `closed by agent (${code}${text})`);
      });
      socket.on('error', (err: Error) => log.warn({ err }, 'agent socket error'));
    },
  );
};
