import http from 'node:http';
import tls from 'node:tls';
import { freePort } from '@tether/testkit';
import { createExternalRoutingController, type EndpointMap, type ExternalProxyOptions } from '../../../src/proxy/index.js';
import { silentLogger, tempDir } from './harness.js';

// The static proxy against a real Caddy and a real knotd: the controller the
// agent builds for TETHER_PROXY=external.

export async function staticController(o: { adminUrl: string; adminListen: string; stateDir: string; httpPort: number; endpoints?: () => Promise<EndpointMap> } & Partial<ExternalProxyOptions>) {
  const answererPort = o.answererListen?.port ?? (await freePort());
  return createExternalRoutingController({
    adminTimeoutMs: 5_000,
    checkIntervalMs: 0,
    logger: silentLogger,
    serving: { tls: 'off', httpPort: o.httpPort, httpsPort: 443 },
    answererListen: { host: '127.0.0.1', port: answererPort },
    knotd: 'knotd',
    knotc: 'knotc',
    answererProbeTimeoutMs: 300,
    answersIntervalMs: 200,
    lookupRefreshMs: 500,
    askPort: await freePort(),
    issuer: 'internal',
    endpoints: o.endpoints ?? (() => Promise.resolve(new Map())),
    ...o,
  });
}

/** The static controller with TLS auto and Caddy's internal CA (certificates on demand), started against `caddy`. */
export async function startStaticTlsController(caddy: { adminPort: number; httpPort: number }, adminUrl: string) {
  const httpsPort = await freePort();
  const controller = await staticController({
    adminUrl,
    adminListen: `127.0.0.1:${caddy.adminPort}`,
    stateDir: await tempDir(),
    httpPort: caddy.httpPort,
    serving: { tls: 'auto', httpPort: caddy.httpPort, httpsPort },
    issuer: 'internal',
  });
  await controller.start();
  return { controller, httpsPort };
}

/** GET with a Host header; also returns the proxy's marker header. */
export function getWithMarker(port: number, host: string, urlPath = '/', address = '127.0.0.1'): Promise<{ status: number; body: string; marker: string | null }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: address, port, path: urlPath, headers: { host }, agent: false }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString('utf8')));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, marker: (res.headers['x-tether-proxy'] as string | undefined) ?? null }));
    });
    req.setTimeout(10_000, () => req.destroy(new Error('GET timed out')));
    req.on('error', reject);
    req.end();
  });
}

/** A TLS handshake with `servername` (SNI): the certificate's names, or the handshake's error. */
export function handshake(port: number, servername: string): Promise<{ ok: true; names: string } | { ok: false; error: string }> {
  return new Promise((resolve) => {
    const socket = tls.connect({ host: '127.0.0.1', port, servername, rejectUnauthorized: false, timeout: 10_000 }, () => {
      const names = socket.getPeerCertificate().subjectaltname ?? '';
      socket.end();
      resolve({ ok: true, names });
    });
    socket.on('error', (e) => resolve({ ok: false, error: e.message }));
    socket.on('timeout', () => (socket.destroy(), resolve({ ok: false, error: 'timeout' })));
  });
}

/** GET over TLS with `host` as SNI and Host header (any certificate accepted). */
export function httpsGet(port: number, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, servername: host, rejectUnauthorized: false }, () => {
      socket.write(`GET / HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
    });
    let raw = '';
    socket.on('data', (c: Buffer) => (raw += c.toString('utf8')));
    socket.on('end', () => resolve({ status: Number(raw.split(' ')[1]), body: raw.split('\r\n\r\n').slice(1).join('') }));
    socket.on('error', reject);
  });
}

/**
 * The agent's faults the static proxy must outlive: SIGKILL, 2 s down, a restart (`start` sets the new process),
 * then that process frozen for `freezeMs` and thawed, with 1 s after. `current` reads the agent process now.
 */
export async function killRestartFreeze(current: () => { pid: number; exited(): Promise<unknown> }, start: () => Promise<void>, freezeMs: number): Promise<void> {
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
  process.kill(current().pid, 'SIGKILL');
  await current().exited();
  await sleep(2_000);
  await start();
  process.kill(current().pid, 'SIGSTOP');
  await sleep(freezeMs);
  process.kill(current().pid, 'SIGCONT');
  await sleep(1_000);
}
