import { Agent, request } from 'undici';
import type { ProxyConfigurator } from './configurator.js';
import { ProxyError } from './errors.js';

// Caddy's admin API over undici. Every call has a deadline (connect, headers,
// body and an overall signal), so a frozen Caddy turns into PROXY_TIMEOUT,
// never into an apply() that hangs and holds every later map behind it.

export interface CaddyAdminOptions {
  /** `http://host:port` or `unix:///path/to/admin.sock`. */
  adminUrl: string;
  /** Deadline of each call, including reading the response. */
  timeoutMs: number;
}

/** A config of 10,000 routes is a few MB; anything far beyond is not Caddy answering. */
const MAX_RESPONSE_BYTES = 256 * 1024 * 1024;

export function parseAdminUrl(adminUrl: string): { origin: string; socketPath: string | null } {
  const url = new URL(adminUrl);
  if (url.protocol === 'unix:') {
    if (!url.pathname.startsWith('/')) throw new Error(`unix admin URL needs an absolute path: ${adminUrl}`);
    // The Host header Caddy checks against admin.origins (see render.ts).
    return { origin: 'http://localhost', socketPath: decodeURIComponent(url.pathname) };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`unsupported admin URL: ${adminUrl}`);
  return { origin: url.origin, socketPath: null };
}

const TIMEOUT_CODES = new Set(['UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

function transportError(error: unknown, what: string, target: string, timeoutMs: number): ProxyError {
  const e = error as { code?: string; name?: string; message?: string; cause?: { code?: string } };
  if (e.name === 'TimeoutError' || e.name === 'AbortError' || TIMEOUT_CODES.has(e.code ?? '')) {
    return new ProxyError('PROXY_TIMEOUT', `${what}: Caddy admin at ${target} did not answer within ${timeoutMs} ms`, { cause: error });
  }
  const detail = e.cause?.code ?? e.code ?? e.message ?? String(error);
  return new ProxyError('PROXY_UNREACHABLE', `${what}: Caddy admin at ${target} unreachable (${detail})`, { cause: error });
}

/** A connection Caddy closed while it sat in the pool (Caddy restarted): safe to try once more. */
const isStaleConnection = (error: unknown) => {
  const code = (error as { code?: string }).code;
  return code === 'UND_ERR_SOCKET' || code === 'ECONNRESET' || code === 'EPIPE';
};

function caddyMessage(body: string): string {
  try {
    const parsed = JSON.parse(body) as { error?: unknown };
    if (typeof parsed.error === 'string') return parsed.error;
  } catch {
    // Not Caddy's JSON error shape; show the text.
  }
  return body.slice(0, 1000);
}

/** One upstream of Caddy's reverse proxies, as `GET /reverse_proxy/upstreams` lists it. */
export interface UpstreamLoad {
  /** The dial address: `c-<id12>.e.rt.tether.internal.:<port>` for a container of the answers. */
  address: string;
  /** Requests (WebSockets included, for as long as they are open) in flight to it now. */
  numRequests: number;
}

/** The admin API as the agent uses it: the config, and the reverse proxy's upstreams (drains count on them). */
export interface CaddyAdmin extends ProxyConfigurator {
  upstreams(): Promise<UpstreamLoad[]>;
}

export function createCaddyAdmin(options: CaddyAdminOptions): CaddyAdmin {
  const { origin, socketPath } = parseAdminUrl(options.adminUrl);
  const target = socketPath ? `unix:${socketPath}` : origin;
  const dispatcher = new Agent({
    connect: socketPath ? { socketPath, timeout: options.timeoutMs } : { timeout: options.timeoutMs },
    headersTimeout: options.timeoutMs,
    bodyTimeout: options.timeoutMs,
    maxResponseSize: MAX_RESPONSE_BYTES,
  });

  async function call(what: string, method: 'GET' | 'POST', path: string, body?: string): Promise<{ status: number; text: string }> {
    const once = async () => {
      const res = await request(`${origin}${path}`, {
        method,
        dispatcher,
        signal: AbortSignal.timeout(options.timeoutMs),
        ...(body === undefined ? {} : { body, headers: { 'content-type': 'application/json' } }),
      });
      return { status: res.statusCode, text: await res.body.text() };
    };
    try {
      try {
        return await once();
      } catch (error) {
        // Both calls are idempotent: Caddy answers a repeated identical load with "unchanged".
        if (!isStaleConnection(error)) throw error;
        return await once();
      }
    } catch (error) {
      throw transportError(error, what, target, options.timeoutMs);
    }
  }

  return {
    target,
    async readRunning() {
      const res = await call('read config', 'GET', '/config/');
      if (res.status !== 200) {
        throw new ProxyError('PROXY_ADMIN_ERROR', `read config: Caddy answered ${res.status}: ${caddyMessage(res.text)}`);
      }
      return res.text;
    },
    async hasObject(id) {
      const res = await call('read config id', 'GET', `/id/${encodeURIComponent(id)}`);
      if (res.status === 200) return true;
      // Caddy answers 404 "unknown object ID" when no object carries it (an empty or another config).
      if (res.status === 404) return false;
      throw new ProxyError('PROXY_ADMIN_ERROR', `read config id: Caddy answered ${res.status}: ${caddyMessage(res.text)}`);
    },
    async load(json) {
      const res = await call('load config', 'POST', '/load', json);
      if (res.status === 200) return;
      // Caddy answers 400 for a config it refused (bad JSON, a port in use); it keeps the old one running.
      const code = res.status >= 400 && res.status < 500 ? 'PROXY_REJECTED_CONFIG' : 'PROXY_ADMIN_ERROR';
      throw new ProxyError(code, `load config: Caddy answered ${res.status}: ${caddyMessage(res.text)}`);
    },
    async upstreams() {
      const res = await call('read upstreams', 'GET', '/reverse_proxy/upstreams');
      if (res.status !== 200) throw new ProxyError('PROXY_ADMIN_ERROR', `read upstreams: Caddy answered ${res.status}: ${caddyMessage(res.text)}`);
      let parsed: unknown;
      try {
        parsed = JSON.parse(res.text);
      } catch {
        throw new ProxyError('PROXY_ADMIN_ERROR', 'read upstreams: Caddy answered no JSON');
      }
      // Only upstreams in use are listed (2.6.2 adds a dynamic one for its request and drops it after); anything but a list is none.
      return (Array.isArray(parsed) ? parsed : []).flatMap((u: { address?: unknown; num_requests?: unknown }) =>
        typeof u?.address === 'string' && Number.isInteger(u.num_requests) ? [{ address: u.address, numRequests: u.num_requests as number }] : [],
      );
    },
    async close() {
      await dispatcher.close();
    },
  };
}
