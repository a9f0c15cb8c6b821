import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { dockerApi, freePort, killPidFile, removeContainersByLabel, spawnProcess, type ManagedProcess } from '@tether/testkit';

// A real host agent process (apps/host-agent/dist/main.js) for end-to-end
// tests. Each agent gets its own state directory and, with Docker, its own
// Tether network and node label, so parallel test files never share state.

const agentMain = createRequire(import.meta.url).resolve('@tether/host-agent/dist/main.js');

/**
 * The env of an agent that drives a testkit Caddy from outside (external mode) with the static proxy and its
 * own knotd on a free loopback port; `extra` adds to it or overrides (TLS, probes).
 */
export async function externalStaticProxyEnv(caddy: { adminUrl: string; httpPort: number }, extra: Record<string, string> = {}): Promise<Record<string, string>> {
  return {
    TETHER_MIN_READY_MS: '200',
    TETHER_PROXY: 'external',
    TETHER_CADDY_ADMIN_URL: caddy.adminUrl,
    TETHER_PROXY_HTTP_PORT: String(caddy.httpPort),
    TETHER_PROXY_ANSWERER_LISTEN: `127.0.0.1:${await freePort()}`,
    ...extra,
  };
}

export interface AgentProcessOptions {
  panelUrl: string;
  token: string;
  nodeName: string;
  runtime?: 'docker' | 'none';
  /** `container`: the agent runs Caddy on its network, HTTP published on `httpPort` (TLS off). */
  proxy?: 'container' | 'none';
  env?: Record<string, string>;
  /** Reuse a stopped agent's state directory (an agent restart on the same node); default: a new one. */
  stateDir?: string;
}

export interface AgentProcess {
  process: ManagedProcess;
  nodeName: string;
  network: string;
  stateDir: string;
  /** Host port of the agent's Caddy (container proxy only). */
  httpPort: number | null;
  stop(): Promise<void>;
  /** Stops the agent and removes its containers, network and state. */
  destroy(): Promise<void>;
}

export async function startAgentProcess(options: AgentProcessOptions): Promise<AgentProcess> {
  const stateDir = options.stateDir ?? mkdtempSync(path.join(os.tmpdir(), `tether-agent-${options.nodeName}-`));
  const network = `tether-e2e-${options.nodeName}-${process.pid}`;
  const proxy = options.proxy ?? 'none';
  const httpPort = proxy === 'container' ? await freePort() : null;
  const env: Record<string, string> = {
    TETHER_PANEL_URL: options.panelUrl,
    TETHER_NODE_TOKEN: options.token,
    TETHER_NODE_NAME: options.nodeName,
    TETHER_RUNTIME: options.runtime ?? 'none',
    TETHER_PROXY: proxy,
    TETHER_STATE_DIR: stateDir,
    TETHER_DOCKER_NETWORK: network,
    TETHER_RECONNECT_MIN_MS: '100',
    TETHER_RECONNECT_MAX_MS: '500',
    TETHER_CONNECT_TIMEOUT_MS: '1000',
    TETHER_HEALTHY_SESSION_MS: '1000',
    TETHER_LOG_LEVEL: 'info',
    // Off unless a test turns it on: its endpoint and Caddy port are per host, and tests run many agents on one.
    TETHER_CANARY_INTERVAL_MS: '0',
    ...(httpPort ? { TETHER_PROXY_TLS: 'off', TETHER_PROXY_HTTP_PORT: String(httpPort), TETHER_PROXY_BIND_ADDRESS: '127.0.0.1' } : {}),
    ...options.env,
  };
  const child = spawnProcess(process.execPath, [agentMain], { env });
  const usesDocker = env.TETHER_RUNTIME === 'docker' || proxy === 'container';
  return {
    process: child,
    nodeName: options.nodeName,
    network,
    stateDir,
    httpPort,
    stop: () => child.stop(),
    async destroy() {
      await child.stop();
      // knotd (external proxy) outlives the agent by design: stopped by its pid file once the agent is gone. Killed
      // while the agent still ran, the agent's supervision started a new one that nobody stopped (five were left).
      await killPidFile(path.join(stateDir, 'answerer', 'knot.pid'));
      if (usesDocker) {
        await removeContainersByLabel(`tether.node=${options.nodeName}`);
        await dockerApi('DELETE', `/networks/${encodeURIComponent(network)}`).catch(() => undefined);
      }
      rmSync(stateDir, { recursive: true, force: true });
    },
  };
}
