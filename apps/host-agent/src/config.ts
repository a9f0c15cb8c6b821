import path from 'node:path';
import Type from 'typebox';
import { ConfigError, parseEnv } from '@tether/common';

// The one place the agent reads process.env. Every variable is listed, with
// its default, in docs/operations.md.

const Ms = (def: number, min = 10) => Type.Integer({ minimum: min, maximum: 86_400_000, default: def });

const EnvSchema = Type.Object({
  TETHER_PANEL_URL: Type.String({ pattern: '^(https?|wss?)://' }),
  TETHER_NODE_TOKEN: Type.String({ minLength: 16, maxLength: 256 }),
  TETHER_NODE_NAME: Type.Optional(Type.String({ minLength: 1, maxLength: 253 })),
  TETHER_STATE_DIR: Type.String({ minLength: 1, default: '.tether-agent' }),
  TETHER_LOG_LEVEL: Type.Union(
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)),
    { default: 'info' },
  ),
  /** Overrides of what `welcome` says; unset means "use the panel's". */
  TETHER_AGENT_IDLE_MS: Type.Optional(Type.Integer({ minimum: 10, maximum: 86_400_000 })),
  TETHER_HEARTBEAT_INTERVAL_MS: Type.Optional(Type.Integer({ minimum: 10, maximum: 86_400_000 })),
  TETHER_RECONNECT_MIN_MS: Ms(500),
  TETHER_RECONNECT_MAX_MS: Ms(30_000),
  /** A session that stayed up this long resets the backoff. */
  TETHER_HEALTHY_SESSION_MS: Ms(10_000),
  TETHER_CONNECT_TIMEOUT_MS: Ms(10_000),
  /** Container runtime: docker, or none (no containers; deploys fail with RUNTIME_UNAVAILABLE). */
  TETHER_RUNTIME: Type.Union([Type.Literal('docker'), Type.Literal('none')], { default: 'docker' }),
  DOCKER_HOST: Type.Optional(Type.String({ minLength: 1 })),
  /** Docker network Tether owns; service containers and the proxy container join it. */
  TETHER_DOCKER_NETWORK: Type.String({ minLength: 1, maxLength: 64, default: 'tether' }),
  /** Proxy: container (agent runs Caddy on Tether's network), external (TETHER_CADDY_ADMIN_URL), or none. */
  TETHER_PROXY: Type.Union([Type.Literal('container'), Type.Literal('external'), Type.Literal('none')], { default: 'none' }),
  TETHER_CADDY_ADMIN_URL: Type.Optional(Type.String({ pattern: '^https?://' })),
  TETHER_CADDY_CONFIG_PATH: Type.Optional(Type.String({ minLength: 1 })),
});

export interface AgentConfig {
  panelUrl: string;
  nodeToken: string;
  nodeName: string | undefined;
  stateDir: string;
  logLevel: string;
  overrides: { agentIdleTimeoutMs?: number; heartbeatIntervalMs?: number };
  reconnect: { minMs: number; maxMs: number; healthySessionMs: number; connectTimeoutMs: number };
  runtime: { kind: 'docker' | 'none'; dockerHost: string | undefined; network: string };
  proxy: { kind: 'container' | 'external' | 'none'; caddyAdminUrl: string | undefined; caddyConfigPath: string };
}

export { ConfigError };

export function loadConfig(env: Record<string, string | undefined>): AgentConfig {
  const e = parseEnv(EnvSchema, env);
  const problems: string[] = [];
  if (e.TETHER_PROXY === 'external' && !e.TETHER_CADDY_ADMIN_URL) {
    problems.push('TETHER_CADDY_ADMIN_URL: required when TETHER_PROXY=external');
  }
  if (e.TETHER_RECONNECT_MIN_MS > e.TETHER_RECONNECT_MAX_MS) {
    problems.push('TETHER_RECONNECT_MIN_MS: must not exceed TETHER_RECONNECT_MAX_MS');
  }
  if (problems.length > 0) throw new ConfigError(problems);
  const stateDir = path.resolve(e.TETHER_STATE_DIR);
  return {
    panelUrl: e.TETHER_PANEL_URL,
    nodeToken: e.TETHER_NODE_TOKEN,
    nodeName: e.TETHER_NODE_NAME,
    stateDir,
    logLevel: e.TETHER_LOG_LEVEL,
    overrides: {
      ...(e.TETHER_AGENT_IDLE_MS !== undefined ? { agentIdleTimeoutMs: e.TETHER_AGENT_IDLE_MS } : {}),
      ...(e.TETHER_HEARTBEAT_INTERVAL_MS !== undefined ? { heartbeatIntervalMs: e.TETHER_HEARTBEAT_INTERVAL_MS } : {}),
    },
    reconnect: {
      minMs: e.TETHER_RECONNECT_MIN_MS,
      maxMs: e.TETHER_RECONNECT_MAX_MS,
      healthySessionMs: e.TETHER_HEALTHY_SESSION_MS,
      connectTimeoutMs: e.TETHER_CONNECT_TIMEOUT_MS,
    },
    runtime: { kind: e.TETHER_RUNTIME, dockerHost: e.DOCKER_HOST, network: e.TETHER_DOCKER_NETWORK },
    proxy: {
      kind: e.TETHER_PROXY,
      caddyAdminUrl: e.TETHER_CADDY_ADMIN_URL,
      caddyConfigPath: e.TETHER_CADDY_CONFIG_PATH ? path.resolve(e.TETHER_CADDY_CONFIG_PATH) : path.join(stateDir, 'caddy.json'),
    },
  };
}
