import { EventEmitter } from 'node:events';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import type { ConnectionState } from '../src/connection/panel-connection.js';
import { createAgentMetrics } from '../src/metrics/agent-metrics.js';
import { startMetricsServer } from '../src/metrics/metrics-server.js';

// The agent's metrics endpoint: off unless configured, loopback by default,
// /metrics and /healthz only, and metrics that follow the live connection.
// (promtool checks a live agent's output in the panel's prometheus test.)

const base = { TETHER_PANEL_URL: 'http://127.0.0.1:1', TETHER_NODE_TOKEN: 'x'.repeat(32) };

describe('agent metrics endpoint', () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0)) await c();
  });

  it('is off by default and on loopback when a port is set', () => {
    expect(loadConfig(base).metrics).toBeNull();
    expect(loadConfig({ ...base, TETHER_AGENT_METRICS_PORT: '9464' }).metrics).toEqual({ host: '127.0.0.1', port: 9464 });
  });

  it('reloads by kind and the canary, from what the routing status reports (absent when the canary is off)', async () => {
    const connection = Object.assign(new EventEmitter(), { state: 'waiting' as ConnectionState });
    const causes = { reload: 2, proxyRestarted: 1, proxyUnreachable: 0, unexplained: 0 };
    let routing: Record<string, unknown> = { appliedHash: null, reloadsTotal: 4, reloadsToday: 1, lastReloadAt: null, lastReloadReason: null };
    const off = await createAgentMetrics({ connection: connection as never, routing: () => routing as never }).metrics();
    expect(off).not.toMatch(/tether_agent_canary/);
    routing = {
      ...routing,
      reloadKinds: { initial: 1, repairEmpty: 1, change: 1, repairDrift: 1 },
      canary: { connected: true, dropsToday: 1, dropsTotal: 3, causesTotal: causes, causesToday: causes, lastDropAt: null, lastDropCause: null, httpFailuresTotal: 0 },
    };
    const text = await createAgentMetrics({ connection: connection as never, routing: () => routing as never }).metrics();
    expect(text).toMatch(/^tether_agent_proxy_reloads_by_kind_total\{kind="repair-empty"\} 1$/m);
    expect(text).toMatch(/^tether_agent_canary_connected 1$/m);
    expect(text).toMatch(/^tether_agent_canary_drops_total\{cause="reload"\} 2$/m);
    expect(text).toMatch(/^tether_agent_canary_drops_total\{cause="proxy-restarted"\} 1$/m);
  });

  it('drains: ended and cut connections of this run, read at scrape time (absent without a Docker runtime)', async () => {
    const connection = Object.assign(new EventEmitter(), { state: 'waiting' as ConnectionState });
    const routing = { appliedHash: null, reloadsTotal: 0, reloadsToday: 0, lastReloadAt: null, lastReloadReason: null };
    expect(await createAgentMetrics({ connection: connection as never, routing: () => routing }).metrics()).not.toMatch(/tether_agent_drain/);
    const stats = { ended: 1, connectionsCut: 0 };
    const registry = createAgentMetrics({ connection: connection as never, routing: () => routing, drains: () => stats });
    expect(await registry.metrics()).toMatch(/^tether_agent_drain_connections_cut_total 0$/m);
    Object.assign(stats, { ended: 3, connectionsCut: 5 });
    const text = await registry.metrics();
    expect(text).toMatch(/^tether_agent_drains_total 3$/m);
    expect(text).toMatch(/^tether_agent_drain_connections_cut_total 5$/m);
  });

  it('serves metrics that follow the connection, /healthz, and nothing else', async () => {
    const connection = Object.assign(new EventEmitter(), { state: 'waiting' as ConnectionState });
    const routing = { appliedHash: null, reloadsTotal: 7, reloadsToday: 2, lastReloadAt: null, lastReloadReason: null };
    const registry = createAgentMetrics({ connection: connection as never, routing: () => routing });
    const server = await startMetricsServer({ host: '127.0.0.1', port: 0, registry, health: () => ({ connection: connection.state, sessionId: null }) });
    closers.push(server.close);
    const url = `http://127.0.0.1:${server.port}`;
    const scrape = async () => (await fetch(`${url}/metrics`)).text();
    let text = await scrape();
    expect(text).toMatch(/^tether_agent_session_connected 0$/m);
    expect(text).toMatch(/^tether_agent_proxy_reloads_total 7$/m);
    expect(text).toMatch(/^tether_agent_proxy_reloads_today 2$/m);
    expect(text).not.toMatch(/nodejs_active_handles_total/);
    connection.state = 'ready';
    connection.emit('ready', { sessionId: 's', timing: {} });
    connection.emit('closed', { code: 4000, reason: 'idle', sessionId: 's', retryInMs: 1 });
    text = await scrape();
    expect(text).toMatch(/^tether_agent_session_connected 1$/m);
    expect(text).toMatch(/^tether_agent_sessions_opened_total 1$/m);
    expect(text).toMatch(/^tether_agent_session_closes_total\{reason="IDLE_TIMEOUT"\} 1$/m);
    expect(await (await fetch(`${url}/healthz`)).json()).toEqual({ status: 'ok', connection: 'ready', sessionId: null });
    expect((await fetch(`${url}/other`)).status).toBe(404);
    expect((await fetch(`${url}/metrics`, { method: 'POST' })).status).toBe(405);
  });
});
