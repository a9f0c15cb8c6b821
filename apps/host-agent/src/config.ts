import { existsSync } from 'node:fs';
import { isIP } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { answererRootUsable } from './answerer-root.js';
import { ConfigError, parseEnv, splitHostPort } from '@tether/common';
import { pinnedProtocolRange } from '@tether/protocol';
import { canonicalIp } from './runtime/published-port.js';
import { DEFAULT_STATE_DIR, EnvSchema, type Env } from './config-env.js';

// The one place the agent reads process.env: config-env.ts says what each variable may be, this file what the
// agent makes of them. Every variable is listed, with its default, in docs/operations.md.

export { DEFAULT_FENCE_AFTER_MS } from './config-env.js';

/** Every variable this app reads (docs/operations.md lists each; a test checks). */
export const ENV_VARS: readonly string[] = Object.keys(EnvSchema.properties);

/** The agent's configuration, as loadConfig makes it (its type is what loadConfig returns: nothing restated). */
export type AgentConfig = ReturnType<typeof loadConfig>;

/** Unix socket paths longer than this do not fit in sockaddr_un. */
const MAX_SOCKET_PATH = 107;

export { ConfigError };

/** TETHER_PANEL_URL: one URL or a comma-separated list, each http(s) or ws(s) and parseable. */
function parsePanelUrls(value: string, problems: string[]): string[] {
  const urls = value.split(',').map((u) => u.trim()).filter((u) => u.length > 0);
  for (const u of urls) {
    let ok = /^(https?|wss?):\/\//.test(u);
    try {
      new URL(u);
    } catch {
      ok = false;
    }
    if (!ok) problems.push(`TETHER_PANEL_URL: ${JSON.stringify(u.slice(0, 200))} is not an http(s) or ws(s) URL`);
  }
  if (urls.length === 0) problems.push('TETHER_PANEL_URL: no URL given');
  return urls;
}

/** TETHER_PUBLIC_ADDRESSES: IP addresses separated by commas; null when unset. */
function parseAddresses(value: string | undefined, problems: string[]): string[] | null {
  if (value === undefined) return null;
  const addresses = value.split(',').map((a) => a.trim()).filter((a) => a.length > 0);
  for (const a of addresses) if (isIP(a) === 0) problems.push(`TETHER_PUBLIC_ADDRESSES: ${JSON.stringify(a.slice(0, 100))} is not an IP address`);
  if (addresses.length === 0) problems.push('TETHER_PUBLIC_ADDRESSES: no address given');
  return addresses;
}

/** TETHER_ROUTE_PROBE_DNS_SERVER: an IP, `ip:port` or `[v6]:port`; null when unset. */
function parseDnsServer(value: string | undefined, problems: string[]): string | null {
  if (value === undefined) return null;
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([0-9.]+))(?::([0-9]{1,5}))?$/.exec(value);
  const host = m ? (m[1] ?? m[2])! : value;
  const port = m?.[3] === undefined ? 53 : Number(m[3]);
  if (isIP(host) === 0 || port < 1 || port > 65_535) {
    problems.push(`TETHER_ROUTE_PROBE_DNS_SERVER: ${JSON.stringify(value.slice(0, 100))} is not ip, ip:port or [v6]:port`);
    return null;
  }
  return value;
}

/**
 * TETHER_PRIVATE_ADDRESS: one IP literal, IPv4 or IPv6 without brackets or zone; null when unset. Never a wildcard:
 * Docker would publish allocation ports on every interface, the public ones included.
 */
function parsePrivateAddress(value: string | undefined, problems: string[]): string | null {
  if (value === undefined) return null;
  const shown = JSON.stringify(value.slice(0, 100));
  if (isIP(value) === 0 || value.includes('%')) {
    problems.push(`TETHER_PRIVATE_ADDRESS: ${shown} is not an IP address (IPv4, or IPv6 without brackets)`);
    return null;
  }
  if (isIP(value) === 4 ? value === '0.0.0.0' : /^[0:]+$/.test(value)) {
    problems.push(`TETHER_PRIVATE_ADDRESS: ${shown} is the wildcard address; name this node's address on the private network`);
    return null;
  }
  return canonicalIp(value);
}

/** Only the state folder (the HEALTHCHECK needs no more, and must not fail on the rest). */
export function loadStateDir(env: Record<string, string | undefined>): string {
  return path.resolve(env.TETHER_STATE_DIR || DEFAULT_STATE_DIR);
}

/**
 * Static routing needs its answerer: knotd and knotc here, or (container mode) a prepared image. Refused at
 * start, before Caddy is touched: an agent without one would load the static config with nothing answering
 * its lookups, and every route in place would answer `no-route` (docs/operations.md, "Static proxy").
 */
function staticAnswererProblem(e: { TETHER_PROXY: string; TETHER_ANSWERER_IMAGE?: string | undefined; TETHER_ANSWERER_ROOT?: string | undefined; TETHER_PROXY_KNOTD: string; TETHER_PROXY_KNOTC: string }): string | null {
  if (e.TETHER_PROXY === 'none') return null;
  const container = e.TETHER_PROXY === 'container';
  if (container && (e.TETHER_ANSWERER_IMAGE || answererRootUsable(e.TETHER_ANSWERER_ROOT))) return null;
  const missing = [e.TETHER_PROXY_KNOTD, e.TETHER_PROXY_KNOTC].filter((file) => !existsSync(file));
  if (missing.length === 0) return null;
  const image = container ? ', or set TETHER_ANSWERER_IMAGE to an image built by infra/answerer/build-image.sh' : '';
  return `TETHER_PROXY=${e.TETHER_PROXY} needs the answerer, knotd: no ${missing.join(' and no ')} (apt-get install knot${image}), or set TETHER_PROXY=none`;
}

/** The one line an agent still told to run the per-route config stops with (exit 2). */
export const ROUTING_CONFIG_GONE =
  'TETHER_PROXY_ROUTING=config: the per-route config mode is gone, static routing is the only routing; remove TETHER_PROXY_ROUTING from the agent\'s environment (.env, compose file)';

/**
 * The proxy's settings, one shape per TETHER_PROXY, and a rule checked here is a type afterwards: external mode has
 * an admin URL, so `caddyAdminUrl` is a string in its shape. Every shape carries every setting with its default
 * (what an operator reads back is the same whatever the mode). Null after a problem.
 */
function proxySettings(e: Env, stateDir: string, problems: string[]) {
  const settings = {
    caddyAdminUrl: e.TETHER_CADDY_ADMIN_URL,
    caddyConfigPath: e.TETHER_CADDY_CONFIG_PATH ? path.resolve(e.TETHER_CADDY_CONFIG_PATH) : path.join(stateDir, 'caddy.json'),
    caddyAdminListen: e.TETHER_CADDY_ADMIN_LISTEN,
    adminTimeoutMs: e.TETHER_CADDY_ADMIN_TIMEOUT_MS,
    /** External mode: Caddy's certificate storage folder (TETHER_CADDY_STORAGE_DIR); null: not shared. */
    caddyStorageDir: e.TETHER_CADDY_STORAGE_DIR ?? null,
    caddyImage: e.TETHER_CADDY_IMAGE,
    caddyBinary: e.TETHER_CADDY_BINARY,
    tls: e.TETHER_PROXY_TLS,
    httpPort: e.TETHER_PROXY_HTTP_PORT,
    httpsPort: e.TETHER_PROXY_HTTPS_PORT,
    bindAddress: e.TETHER_PROXY_BIND_ADDRESS,
    acmeEmail: e.TETHER_PROXY_ACME_EMAIL,
    acmeCa: e.TETHER_PROXY_ACME_CA,
    acmeCaRoot: e.TETHER_PROXY_ACME_CA_ROOT,
    checkIntervalMs: e.TETHER_PROXY_CHECK_INTERVAL_MS,
    answererListen: splitHostPort(e.TETHER_PROXY_ANSWERER_LISTEN),
    answererImage: e.TETHER_ANSWERER_IMAGE,
    /** Container mode: the answerer tree the agent image carries (TETHER_ANSWERER_ROOT). */
    answererRoot: answererRootUsable(e.TETHER_ANSWERER_ROOT) ? e.TETHER_ANSWERER_ROOT : null,
    knotd: e.TETHER_PROXY_KNOTD,
    knotc: e.TETHER_PROXY_KNOTC,
    answererCheckMs: e.TETHER_PROXY_ANSWERER_CHECK_MS,
    answererProbeTimeoutMs: e.TETHER_PROXY_ANSWERER_PROBE_TIMEOUT_MS,
    lookupRefreshMs: e.TETHER_PROXY_LOOKUP_REFRESH_MS,
    askPort: e.TETHER_PROXY_ASK_PORT,
    tlsIssuer: e.TETHER_PROXY_TLS_ISSUER,
    /** The issuance log Caddy writes and the agent follows (static routing, TLS auto). */
    issuanceLog: e.TETHER_PROXY_ISSUANCE_LOG ?? path.join(stateDir, 'caddy-logs', 'issuance.log'),
  };
  switch (e.TETHER_PROXY) {
    case 'none':
      return { kind: 'none' as const, ...settings };
    case 'container':
      return { kind: 'container' as const, ...settings };
    case 'external': {
      const { caddyAdminUrl } = settings;
      if (caddyAdminUrl) return { kind: 'external' as const, ...settings, caddyAdminUrl };
      problems.push('TETHER_CADDY_ADMIN_URL: required when TETHER_PROXY=external');
      return null;
    }
  }
}

export function loadConfig(env: Record<string, string | undefined>) {
  const e = parseEnv(EnvSchema, env);
  const problems: string[] = [];
  const stateDir = path.resolve(e.TETHER_STATE_DIR);
  const proxy = proxySettings(e, stateDir, problems);
  if (e.TETHER_RECONNECT_MIN_MS > e.TETHER_RECONNECT_MAX_MS) {
    problems.push('TETHER_RECONNECT_MIN_MS: must not exceed TETHER_RECONNECT_MAX_MS');
  }
  if (e.TETHER_RESTART_BACKOFF_MIN_MS > e.TETHER_RESTART_BACKOFF_MAX_MS) {
    problems.push('TETHER_RESTART_BACKOFF_MIN_MS: must not exceed TETHER_RESTART_BACKOFF_MAX_MS');
  }
  if (e.TETHER_PROXY === 'container' && path.join(stateDir, 'caddy', 'run', 'admin.sock').length > MAX_SOCKET_PATH) {
    problems.push(`TETHER_STATE_DIR: too long for the Caddy admin socket under it (max ${MAX_SOCKET_PATH - 'caddy/run/admin.sock'.length - 1} characters)`);
  }
  if (e.TETHER_PROXY_ROUTING === 'config') problems.push(ROUTING_CONFIG_GONE);
  const answerer = staticAnswererProblem(e);
  if (answerer) problems.push(answerer);
  const panelUrls = parsePanelUrls(e.TETHER_PANEL_URL, problems);
  const publicAddresses = parseAddresses(e.TETHER_PUBLIC_ADDRESSES, problems);
  const dnsServer = parseDnsServer(e.TETHER_ROUTE_PROBE_DNS_SERVER, problems);
  const privateAddress = parsePrivateAddress(e.TETHER_PRIVATE_ADDRESS, problems);
  if (problems.length > 0 || !proxy) throw new ConfigError(problems);
  return {
    panelUrls,
    nodeToken: e.TETHER_NODE_TOKEN,
    /** TETHER_NODE_NAME, else this host's name, decided here once: sent in hello, naming this node's containers. */
    nodeName: e.TETHER_NODE_NAME ?? os.hostname(),
    stateDir,
    logLevel: e.TETHER_LOG_LEVEL,
    logFormat: e.TETHER_LOG_FORMAT,
    overrides: {
      ...(e.TETHER_AGENT_IDLE_MS !== undefined ? { agentIdleTimeoutMs: e.TETHER_AGENT_IDLE_MS } : {}),
      ...(e.TETHER_HEARTBEAT_INTERVAL_MS !== undefined ? { heartbeatIntervalMs: e.TETHER_HEARTBEAT_INTERVAL_MS } : {}),
    },
    metrics: e.TETHER_AGENT_METRICS_PORT === undefined ? null : { host: e.TETHER_AGENT_METRICS_HOST, port: e.TETHER_AGENT_METRICS_PORT },
    reconnect: {
      minMs: e.TETHER_RECONNECT_MIN_MS,
      maxMs: e.TETHER_RECONNECT_MAX_MS,
      healthySessionMs: e.TETHER_HEALTHY_SESSION_MS,
      connectTimeoutMs: e.TETHER_CONNECT_TIMEOUT_MS,
    },
    protocolVersions: pinnedProtocolRange(e.TETHER_PROTOCOL_VERSION_MAX),
    fence: { afterMs: e.TETHER_FENCE_AFTER_MS },
    runtime: {
      kind: e.TETHER_RUNTIME,
      dockerHost: e.DOCKER_HOST,
      network: e.TETHER_DOCKER_NETWORK,
      timing: {
        callTimeoutMs: e.TETHER_DOCKER_TIMEOUT_MS,
        observeTimeoutMs: e.TETHER_OBSERVE_TIMEOUT_MS,
        pullTimeoutMs: e.TETHER_IMAGE_PULL_TIMEOUT_MS,
        startTimeoutMs: e.TETHER_START_TIMEOUT_MS,
        minReadyMs: e.TETHER_MIN_READY_MS,
        drainMs: e.TETHER_DRAIN_MS,
        stopTimeoutMs: e.TETHER_STOP_TIMEOUT_MS,
        sweepIntervalMs: e.TETHER_RUNTIME_SWEEP_MS,
      },
      restart: {
        budget: e.TETHER_RESTART_BUDGET,
        backoffInitialMs: e.TETHER_RESTART_BACKOFF_MIN_MS,
        backoffMaxMs: e.TETHER_RESTART_BACKOFF_MAX_MS,
        resetAfterMs: e.TETHER_RESTART_RESET_MS,
      },
      containerLogs: { maxSize: e.TETHER_CONTAINER_LOG_MAX_SIZE, maxFile: e.TETHER_CONTAINER_LOG_MAX_FILE },
      volumes: { scanIntervalMs: e.TETHER_VOLUME_SCAN_INTERVAL_MS, measureIntervalMs: e.TETHER_VOLUME_MEASURE_INTERVAL_MS },
    },
    logs: { maxStreams: e.TETHER_LOG_MAX_STREAMS },
    proxy,
    routeProbes: {
      intervalMs: e.TETHER_ROUTE_PROBE_INTERVAL_MS,
      timeoutMs: e.TETHER_ROUTE_PROBE_TIMEOUT_MS,
      ratePerSecond: e.TETHER_ROUTE_PROBE_RATE,
      publicAddresses,
      dnsServer,
      dnsCacheMs: e.TETHER_ROUTE_PROBE_DNS_CACHE_MS,
    },
    remote: {
      privateAddress,
      probeIntervalMs: e.TETHER_REMOTE_PROBE_INTERVAL_MS,
      probeTimeoutMs: e.TETHER_REMOTE_PROBE_TIMEOUT_MS,
    },
    canary: {
      intervalMs: e.TETHER_CANARY_INTERVAL_MS,
      proxyPort: e.TETHER_CANARY_PROXY_PORT,
      listen: e.TETHER_CANARY_LISTEN,
      upstream: e.TETHER_CANARY_UPSTREAM ?? e.TETHER_CANARY_LISTEN,
      proxyUrl: e.TETHER_CANARY_PROXY_URL ?? null,
    },
  };
}
