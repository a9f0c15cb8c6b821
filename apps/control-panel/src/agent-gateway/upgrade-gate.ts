import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ErrorCode } from '../errors.js';
import { writeRawError } from '../http/edges.js';

// Stands in front of @fastify/websocket's upgrade listener. That plugin runs
// every upgrade through the router and, on a route without a WebSocket
// handler, completes the handshake (101) before closing it: any path was an
// upgrade socket, and each counted toward the opening limit of the agent
// gateway (seen: 505 upgrades of /healthz kept every agent out for 30 s). The
// gate answers here, on the raw socket and before any handshake or route, an
// upgrade that is not `GET /v1/agent/connect` (UPGRADE_NOT_ALLOWED), one on a
// connection over its address's cap (TOO_MANY_CONNECTIONS), and every upgrade
// while the panel closes (NOT_READY); only the rest reach the plugin.

export const AGENT_CONNECT_PATH = '/v1/agent/connect';

type UpgradeListener = (request: IncomingMessage, socket: Duplex, head: Buffer) => void;

export interface UpgradeGateOptions {
  /** Why this upgrade is refused before anything else, or null to let it through. */
  refuse(request: IncomingMessage, socket: Duplex): ErrorCode | null;
  /** Called for an upgrade let through, before the plugin routes it. */
  admitted(request: IncomingMessage, socket: Duplex): void;
}

export function isAgentConnect(request: IncomingMessage): boolean {
  if (request.method !== 'GET' || !request.url) return false;
  const query = request.url.indexOf('?');
  return (query === -1 ? request.url : request.url.slice(0, query)) === AGENT_CONNECT_PATH;
}

/** Puts the gate in front of the upgrade listeners registered so far (the plugin's); returns its removal. */
export function installUpgradeGate(server: Server, options: UpgradeGateOptions): () => void {
  const behind = server.listeners('upgrade') as UpgradeListener[];
  for (const listener of behind) server.off('upgrade', listener);
  const gate: UpgradeListener = (request, socket, head) => {
    const code = options.refuse(request, socket);
    if (code) {
      socket.on('error', () => socket.destroy());
      writeRawError(socket, code);
      socket.end();
      // A client that never closes its end: gone within a second all the same.
      setTimeout(() => socket.destroy(), 1_000).unref();
      return;
    }
    options.admitted(request, socket);
    for (const listener of behind) listener.call(server, request, socket, head);
  };
  server.on('upgrade', gate);
  return () => void server.off('upgrade', gate);
}
