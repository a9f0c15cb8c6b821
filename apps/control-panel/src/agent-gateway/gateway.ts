import { isIP, type Socket } from 'node:net';
import type { FastifyBaseLogger, FastifyPluginAsync, FastifyRequest } from 'fastify';
import { sanitizeText, truncate } from '@tether/common';
import type { RawData, WebSocket } from 'ws';
import {
  CLOSE_CODES,
  FRAME_ERROR_CODES,
  FIELD_LIMITS,
  MAX_INVALID_STREAK,
  createIdGenerator,
  decode,
  encode,
  type FrameError,
  type Hello,
  type ProtocolRange,
  type Timing,
} from '@tether/protocol';
import type { Db } from '../db/database.js';
import type { PanelMetrics } from '../panel-metrics.js';
import { AgentSession, closeHard, type SessionTiming } from '../sessions/session.js';
import type { SessionRegistry } from '../sessions/registry.js';
import type { FrameRouter, SessionFrame } from '../sessions/frame-router.js';
import type { NodeAuthenticator, AuthenticatedNode } from './authenticate.js';
import { AppError } from '../errors.js';
import { FrameGuard, frameBytes, refuseByHead } from './frame-guard.js';
import { OpenAdmission } from './open-admission.js';
import { PendingUpgrades } from './pending-upgrades.js';
import { installUpgradeGate, isAgentConnect } from './upgrade-gate.js';
import { AGENT_TYPES, acceptedOnSession, agreedCapabilities, panelCapabilities } from './panel-capabilities.js';
import type { ConnectionCap } from '../http/connection-cap.js';
import type { Slots } from '../lifecycle.js';

// GET /v1/agent/connect: authenticate before the upgrade, require `hello`
// within the hello timeout, answer `welcome`, then hand every valid frame of
// the session to the registry. Invalid frames get an `error` reply; a run of
// them closes the session with PROTOCOL_ERROR. Nothing an agent sends can
// crash the panel or disturb another session.

export interface GatewayOptions {
  prisma: Db;
  registry: SessionRegistry;
  /** Where every valid frame of a session goes (sessions/frame-router.ts); the gateway registers the session's own types. */
  frames: FrameRouter;
  /** The token check of the upgrade (cached, batched: see NodeAuthenticator). */
  nodeAuth: NodeAuthenticator;
  metrics?: PanelMetrics;
  timing: Timing & { helloTimeoutMs: number; sendBufferLimitBytes: number };
  /**
   * Claims the node for a new session before `welcome` (cluster/cluster.ts); a rejection closes the
   * session with GOING_AWAY (the agent backs off and may reach another panel). Absent: no claim.
   */
  claim?: (nodeId: string, sessionId: string) => Promise<unknown>;
  /** The `hello` versions accepted (TETHER_PROTOCOL_VERSION_MAX); absent: every version this build speaks. */
  protocolVersions?: ProtocolRange;
  /** Upgrades opening at once (upgrade → welcome) past which new ones get 503 + Retry-After (open-admission.ts). */
  maxOpening: number;
  /** The Retry-After of such a 503, in seconds. */
  busyRetryAfterS: () => number;
  /** The per-address cap on connections before authentication (http/connection-cap.ts). */
  connections?: ConnectionCap;
  /** Where the gateway's background part (upgrades still pending) takes its slot in the panel's lifecycle (lifecycle.ts). */
  lifecycle: Slots;
  /** Confirms `workload.allocations` (TETHER_ALLOCATIONS=on); absent: not confirmed. */
  allocations?: boolean;
  /** Confirms `certificates.share`: this panel has a secrets key to seal certificate keys with; absent: not confirmed. */
  certificates?: boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    agentNode?: AuthenticatedNode;
  }

}

export const agentGateway: FastifyPluginAsync<GatewayOptions> = async (app, opts) => {
  const spoken = panelCapabilities(opts.allocations === true, opts.certificates === true);
  const nextId = createIdGenerator('p');
  // The frames that belong to the session itself; the agent side registers the others.
  const who = (s: AgentSession) => ({ node: s.nodeName, nodeId: s.nodeId, sessionId: s.id });
  const unregister = [
    opts.frames.handle('pong', (s) => s.recordPong()),
    opts.frames.handle('ack', (s, m) => {
      if (!s.acknowledge(m.ref)) app.log.debug({ ...who(s), ref: m.ref }, 'ack nobody waits for');
    }),
    opts.frames.handle('error', (s, m) => {
      app.log.warn({ ...who(s), code: m.code, ref: m.ref, agentMessage: sanitizeText(m.message) }, 'agent rejected a frame');
    }),
  ];
  app.addHook('onClose', async () => unregister.forEach((off) => off()));
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

  const replyError = (socket: WebSocket, error: FrameError) => {
    socket.send(encode({ type: 'error', id: nextId(), ref: error.ref, code: error.code, message: truncate(error.message, FIELD_LIMITS.text) }));
  };

  const pending = new PendingUpgrades();
  const admission = new OpenAdmission(opts.maxOpening);
  const removeGate = installUpgradeGate(app.server, {
    refuse: (request, socket) => {
      if (pending.closing) return 'NOT_READY';
      const code = opts.connections?.isRefused(socket) ? 'TOO_MANY_CONNECTIONS' : isAgentConnect(request) ? null : 'UPGRADE_NOT_ALLOWED';
      if (code) opts.metrics?.edgeRefusals.inc({ code });
      return code;
    },
    admitted: (_request, socket) => {
      admission.arrived(socket);
      pending.add(socket);
    },
  });
  opts.lifecycle.provide('agent-upgrades', { stop: () => pending.close() });
  app.addHook('onClose', async () => removeGate());

  app.get(
    '/v1/agent/connect',
    {
      websocket: true,
      schema: { hide: true },
      preValidation: async (request, reply) => {
        if (admission.refuse(request.raw.socket)) {
          opts.metrics?.upgradesRefusedBusy.inc();
          void reply.header('retry-after', String(opts.busyRetryAfterS()));
          throw new AppError('NOT_READY', 'the panel is opening too many sessions at once; retry after Retry-After');
        }
        request.agentNode = await opts.nodeAuth.authenticate(request);
      },
    },
    (socket, request) => {
      const node = request.agentNode!;
      const tcp = request.raw.socket;
      pending.settled(tcp);
      const peer = `${request.socket.remoteAddress}:${request.socket.remotePort}`;
      releaseUpgrade(socket, request);
      // Made on first use: most sessions never log, and a child logger per session is memory kept for hours.
      let logger: FastifyBaseLogger | undefined;
      const log = () => (logger ??= app.log.child({ node: node.name, nodeId: node.id, peer }));
      let session: AgentSession | undefined;
      let preHelloInvalid = 0;
      const guard = new FrameGuard();
      let resumeTimer: NodeJS.Timeout | undefined;

      const helloTimer = setTimeout(() => {
        log().warn({ helloTimeoutMs: opts.timing.helloTimeoutMs }, 'no hello in time');
        closeHard(socket, CLOSE_CODES.HELLO_TIMEOUT, `no hello within ${opts.timing.helloTimeoutMs} ms`);
      }, opts.timing.helloTimeoutMs);
      helloTimer.unref();

      /** A rejected frame: counted, answered within the reply budget, and paid for from the read budget. */
      const reject = (error: FrameError, bytes: number) => {
        opts.metrics?.invalidFrames.inc({ code: error.code });
        if (guard.mayReply()) replyError(socket, error);
        const pauseMs = guard.rejected(bytes);
        if (pauseMs > 0 && !resumeTimer) {
          // Stop reading this peer until its budget refills: TCP holds the sender back, nobody else waits.
          socket.pause();
          resumeTimer = setTimeout(() => {
            resumeTimer = undefined;
            socket.resume();
          }, pauseMs);
          resumeTimer.unref();
        }
      };

      const protocolError = (message: string) => {
        if (session) session.teardown(CLOSE_CODES.PROTOCOL_ERROR, message);
        else {
          clearTimeout(helloTimer);
          closeHard(socket, CLOSE_CODES.PROTOCOL_ERROR, message);
        }
      };

      // Its own close code (after the coded error) so an agent can tell "speak another version" from a broken frame.
      const refuseVersion = (message: string) => {
        if (session) return protocolError(message); // a second hello, whatever its version, is a broken session
        clearTimeout(helloTimer);
        closeHard(socket, CLOSE_CODES.UNSUPPORTED_PROTOCOL_VERSION, message);
      };

      let claiming = false;
      const onHello = async (hello: Hello) => {
        clearTimeout(helloTimer);
        // The panel began stopping while this upgrade was authenticated: a session opened now would keep the
        // server from closing (its socket counts as a connection) and outlive the panel.
        if (opts.registry.isStopping) return closeHard(socket, CLOSE_CODES.SERVICE_RESTART, opts.registry.restartReason);
        if (hello.node !== node.name) log().warn({ reported: hello.node }, 'hello names another node than the token; the token decides');
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
            log().warn({ err }, 'could not claim the node; session refused');
            s.teardown(CLOSE_CODES.GOING_AWAY, 'this panel cannot claim the node now; reconnect');
            return;
          } finally {
            claiming = false;
          }
          if (s.closed || socket.readyState !== socket.OPEN) return void s.teardown(CLOSE_CODES.GOING_AWAY, 'closed while claiming');
          if (opts.registry.isStopping) return void s.teardown(CLOSE_CODES.SERVICE_RESTART, opts.registry.restartReason);
        }
        admitted = true;
        session = s;
        session.recordHello(hello.containers, hello.runtime, hello.routing);
        // Agents without the list (older ones) get none and no `capabilities` field, as before.
        const capabilities = agreedCapabilities(spoken, hello);
        // A private address that is not an address is not one: the node is then served by its own replicas only.
        session.setCapabilities(capabilities ?? [], hello.privateAddress && isIP(hello.privateAddress) !== 0 ? hello.privateAddress : null, hello.challengePort ?? null, hello.fence ?? null);
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
        admission.done(tcp);
        // Authenticated and welcomed: no longer one of its address's unproven connections.
        opts.connections?.release(tcp);
      };

      socket.on('message', (data: RawData, isBinary: boolean) => {
        // After hello, a frame that starts with a type the panel does not take is refused unparsed.
        const early = session ? refuseByHead(data, isBinary, AGENT_TYPES) : null;
        const result = early ? ({ ok: false, error: early } as const) : decode(data, { binary: isBinary, protocolVersions: opts.protocolVersions });
        if (!result.ok) {
          reject(result.error, frameBytes(data));
          if (result.error.code === FRAME_ERROR_CODES.UNSUPPORTED_PROTOCOL_VERSION) return refuseVersion(result.error.message);
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
          reject({ code: FRAME_ERROR_CODES.UNEXPECTED_MESSAGE, message: `expected hello, got ${message.type}`, ref: message.id }, frameBytes(data));
          return protocolError(`first frame must be hello, got ${message.type}`);
        }
        if (session.closed) return;
        if (!acceptedOnSession(message.type, session)) {
          const streak = session.recordInvalid();
          reject({ code: FRAME_ERROR_CODES.UNEXPECTED_MESSAGE, message: `${message.type} is not accepted from an agent here`, ref: message.id }, frameBytes(data));
          if (streak >= MAX_INVALID_STREAK) protocolError(`${streak} invalid frames in a row`);
          return;
        }
        session.touch();
        opts.frames.route(session, message as SessionFrame);
      });

      socket.on('close', (code: number, reason: Buffer) => {
        clearTimeout(helloTimer);
        clearTimeout(resumeTimer);
        // The close reason is the agent's free text and ends up in a session_events row: sanitised, bounded.
        const text = reason.length ? `: ${sanitizeText(reason, { keepNewlines: false, maxLength: 120 })}` : '';
        session?.teardown(code, `closed by agent (${code}${text})`);
      });
      socket.on('error', (err: Error) => log().warn({ err }, 'agent socket error'));
    },
  );
};

/**
 * Lets go of what the upgrade request would otherwise keep for the whole
 * session (hours): @fastify/websocket's error listener holds the Fastify
 * request and reply, and the TCP socket still points at the HTTP response
 * (and through it the request, its headers and the upgrade head). The
 * session's own error listener replaces the first.
 */
function releaseUpgrade(socket: WebSocket, request: FastifyRequest): void {
  socket.removeAllListeners('error');
  const tcp = request.raw.socket as Socket & { _httpMessage?: { detachSocket(socket: Socket): void } | null };
  tcp._httpMessage?.detachSocket(tcp);
}
