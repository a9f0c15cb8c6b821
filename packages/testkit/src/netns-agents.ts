import type { Host } from './netns-hosts.js';

// The environment of a host agent running inside one of createHostNetwork's
// hosts (the cross-node routing e2e test and bench/cross-node.ts): its own
// Docker engine, Caddy and answerer in containers published on the host's
// address, that address as its private one, short reconnects. Tether's own
// variables, in one place, so the test and the benchmark run the same agent.

export interface HostAgentEnvOptions {
  panelUrl: string;
  token: string;
  nodeName: string;
  stateDir: string;
  /** Caddy's SRV refresh and the agent's probe of remote endpoints (ms). */
  lookupRefreshMs: number;
  remoteProbeMs: number;
  extra?: Record<string, string>;
}

export function hostAgentEnv(host: Host, o: HostAgentEnvOptions): NodeJS.ProcessEnv {
  if (!host.daemon) throw new Error(`${host.name}: start its Docker engine first (startDaemons)`);
  return {
    ...process.env,
    DOCKER_HOST: host.daemon.dockerHost,
    TETHER_PANEL_URL: o.panelUrl,
    TETHER_NODE_TOKEN: o.token,
    TETHER_NODE_NAME: o.nodeName,
    TETHER_RUNTIME: 'docker',
    TETHER_PROXY: 'container',
    TETHER_PROXY_TLS: 'off',
    TETHER_PROXY_HTTP_PORT: '80',
    TETHER_PROXY_BIND_ADDRESS: host.address,
    TETHER_PROXY_LOOKUP_REFRESH_MS: String(o.lookupRefreshMs),
    TETHER_PRIVATE_ADDRESS: host.address,
    TETHER_REMOTE_PROBE_INTERVAL_MS: String(o.remoteProbeMs),
    TETHER_REMOTE_PROBE_TIMEOUT_MS: String(Math.max(100, Math.floor(o.remoteProbeMs * 0.8))),
    TETHER_STATE_DIR: o.stateDir,
    TETHER_DOCKER_NETWORK: 'tether',
    TETHER_RECONNECT_MIN_MS: '100',
    TETHER_RECONNECT_MAX_MS: '500',
    TETHER_CONNECT_TIMEOUT_MS: '1000',
    TETHER_MIN_READY_MS: '200',
    TETHER_DRAIN_MS: '200',
    TETHER_STOP_TIMEOUT_MS: '2000',
    TETHER_CANARY_INTERVAL_MS: '0',
    TETHER_LOG_LEVEL: 'info',
    ...o.extra,
  };
}
