import http from 'node:http';
import https from 'node:https';
import { errorMessage, truncate } from '@tether/common';
import type { TLSSocket } from 'node:tls';
import { FIELD_LIMITS, type RouteCertificate, type RouteProbe } from '@tether/protocol';
import { describeCertificate } from './certificate.js';

// One end-to-end probe of a customer route through the agent's own proxy: a GET
// with the route's Host (and SNI over TLS) and `x-tether-probe: 1`, judged by
// who made the answer. Answers Caddy makes itself carry `x-tether-proxy`
// (static-render.ts); an unmarked answer is the app's, whatever its status.

export const PROBE_HEADER = 'x-tether-probe';
const PROXY_HEADER = 'x-tether-proxy';

export interface ProbeTarget {
  /** Where the proxy listens, as the agent reaches it. */
  host: string;
  port: number;
  /** TLS with SNI = the route's domain (the certificate is not judged here). */
  tls: boolean;
}

export interface ProbedRoute {
  domain: string;
  pathPrefix: string | null;
}

/** The proxy marks every answer it makes itself (static-render.ts PROXY_HEADER): only the mark says "proxy". */
export function judge(status: number, marked: boolean): Pick<RouteProbe, 'state' | 'madeBy'> {
  const byProxy = marked;
  return { madeBy: byProxy ? 'proxy' : 'app', state: !byProxy && status < 500 ? 'serving' : 'failing' };
}

export function probeRoute(target: ProbeTarget, route: ProbedRoute, timeoutMs: number, now: () => Date = () => new Date()): Promise<RouteProbe> {
  const at = now().toISOString();
  const started = performance.now();
  const base = { domain: route.domain, pathPrefix: route.pathPrefix, at };
  const latency = () => Math.max(0, Math.round(performance.now() - started));
  return new Promise((resolve) => {
    const options = {
      host: target.host,
      port: target.port,
      method: 'GET',
      path: route.pathPrefix && route.pathPrefix !== '/' ? route.pathPrefix : '/',
      headers: { host: route.domain, [PROBE_HEADER]: '1', 'user-agent': 'tether-route-probe' },
      agent: false as const,
    };
    let settled = false;
    const done = (probe: RouteProbe) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(probe);
    };
    // Over TLS: the certificate the handshake showed, or why there was none (a handshake that failed).
    let seen: Omit<RouteCertificate, 'lastError'> | null = null;
    const certificate = (error: string | null): { certificate?: RouteCertificate } =>
      target.tls ? { certificate: { issuer: null, notBefore: null, notAfter: null, serial: null, ...seen, lastError: error } } : {};
    const fail = (error: string) => {
      const text = truncate(error, FIELD_LIMITS.text);
      done({ ...base, state: 'failing', madeBy: 'none', status: null, error: text, latencyMs: latency(), ...certificate(seen ? null : text) });
    };
    const onResponse = (res: http.IncomingMessage) => {
      const status = res.statusCode ?? 0;
      const verdict = judge(status, res.headers[PROXY_HEADER] !== undefined);
      res.resume();
      req.destroy();
      done({ ...base, ...verdict, status, error: null, latencyMs: latency(), ...certificate(null) });
    };
    const req = target.tls
      ? https.request({ ...options, servername: route.domain, rejectUnauthorized: false }, onResponse)
      : http.request(options, onResponse);
    if (target.tls) {
      req.on('socket', (socket) =>
        socket.once('secureConnect', () => {
          const raw = (socket as TLSSocket).getPeerCertificate().raw;
          if (raw) seen = describeCertificate(raw);
        }),
      );
    }
    const timer = setTimeout(() => {
      fail(`no answer within ${timeoutMs} ms`);
      req.destroy();
    }, timeoutMs);
    req.on('error', (err) => fail(errorMessage(err)));
    req.end();
  });
}
