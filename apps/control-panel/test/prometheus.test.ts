import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PanelMessage } from '@tether/protocol';
import { ensureCaddy, ensureKnot, ensurePromtool, freePort, repoRoot, startCaddy, waitFor, type TestCaddy } from '@tether/testkit';
import { startAgentProcess, type AgentProcess } from './helpers/agent-process.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { exposedNames, metricNamesIn, promtool } from './helpers/promql.js';
import { RawAgent } from './helpers/raw-agent.js';

// Prometheus conventions on a live panel's /metrics (promtool check metrics),
// the alert rules (promtool check rules, and a unit test per alert), and that
// every PromQL expression in the alerts and the Grafana board names a metric
// a live panel or agent exposes; the same for a live agent's /metrics.

// The live agent runs the static proxy (a real Caddy and knotd), so the answerer's metrics are exposed too.
const ready = (await ensurePromtool()).available && (await ensureCaddy()).available && (await ensureKnot()).available;
const promDir = path.join(repoRoot, 'infra', 'prometheus');

function alertExpressions(): { name: string; expr: string }[] {
  const text = readFileSync(path.join(promDir, 'alerts.yml'), 'utf8');
  const out: { name: string; expr: string }[] = [];
  let name = '';
  for (const line of text.split('\n')) {
    const a = /^\s*- alert:\s*(\S+)/.exec(line);
    if (a) name = a[1]!;
    const e = /^\s*expr:\s*(.+)$/.exec(line);
    if (e) out.push({ name, expr: e[1]! });
  }
  return out;
}

function boardExpressions(): { name: string; expr: string }[] {
  const board = JSON.parse(readFileSync(path.join(repoRoot, 'infra', 'grafana', 'tether.json'), 'utf8')) as {
    panels: { title: string; targets?: { expr: string }[] }[];
  };
  return board.panels.flatMap((p) => (p.targets ?? []).map((t) => ({ name: p.title, expr: t.expr })));
}

describe('PromQL metric names (the reader the name check relies on)', () => {
  it('finds metric names and nothing else', () => {
    expect(metricNamesIn('sum by (node) (increase(tether_a_total{kind="x y"}[1h])) > 6')).toEqual(['tether_a_total']);
    expect(metricNamesIn('histogram_quantile(0.99, sum by (le) (rate(tether_b_bucket[5m])))')).toEqual(['tether_b_bucket']);
    expect(metricNamesIn('tether_c == 0 and on(node) tether_d == 1e3')).toEqual(['tether_c', 'tether_d']);
  });
});

describe('the Grafana board', () => {
  it('shows route health and certificates: a panel per route and certificate series', () => {
    const shown = new Set(boardExpressions().flatMap(({ expr }) => metricNamesIn(expr)));
    for (const m of ['tether_route_up', 'tether_route_probe_duration_seconds', 'tether_route_certificate_expiry_seconds', 'tether_route_certificate_error']) {
      expect(shown, m).toContain(m);
    }
    // Expiry in days, as the alert's bound is said.
    expect(boardExpressions().find((e) => e.expr.includes('tether_route_certificate_expiry_seconds'))!.expr).toMatch(/\/ 86400$/);
  });
});

describe.skipIf(!ready)('Prometheus artefacts', () => {
  let panel: Panel;
  let agents: RawAgent[] = [];
  let exposition = '';
  let agentExposition = '';
  let agentProcess: AgentProcess | undefined;
  let caddy: TestCaddy | undefined;

  beforeAll(async () => {
    panel = await startPanel({ env: { TETHER_FLEET_REFRESH_MS: '200', TETHER_SESSION_IDLE_MS: '600' } });
    const live = await panel.createNode('prom-live');
    const gone = await panel.createNode('prom-gone');
    agents = [
      await RawAgent.connect({ url: panel.url, token: live.token, node: live.name, heartbeatMs: 100 }),
      await RawAgent.connect({ url: panel.url, token: gone.token, node: gone.name }),
    ];
    // The live one probes a route (capability routes.probe): the per-route series show.
    agents[0]!.routingExtra = {
      probes: [
        {
          domain: 'shop.prom.test',
          pathPrefix: null,
          state: 'serving',
          at: new Date().toISOString(),
          status: 200,
          madeBy: 'app',
          error: null,
          latencyMs: 12,
          certificate: { issuer: 'CN=Test CA', notBefore: '2026-01-01T00:00:00.000Z', notAfter: '2099-01-01T00:00:00.000Z', serial: '1f', lastError: null },
        },
      ],
      probeIntervalMs: 60_000,
    };
    // One goes silent: the per-node series then show a reachable and an unreachable node.
    agents[1]!.goSilent();
    await agents[1]!.waitClosed(5_000);
    exposition = await waitFor(async () => {
      const text = await (await fetch(`${panel.url}/metrics`)).text();
      return text.includes('tether_node_reachable{node="prom-gone"} 0') &&
        text.includes('tether_node_reachable{node="prom-live"} 1') &&
        text.includes('tether_route_up{node="prom-live",domain="shop.prom.test",path_prefix=""} 1')
        ? text
        : null;
    }, { timeoutMs: 5_000 });
    // A real agent process with its metrics endpoint on, connected to the panel.
    const real = await panel.createNode('prom-agent');
    const metricsPort = await freePort();
    caddy = await startCaddy();
    agentProcess = await startAgentProcess({
      panelUrl: panel.url,
      token: real.token,
      nodeName: real.name,
      env: {
        TETHER_AGENT_METRICS_PORT: String(metricsPort),
        TETHER_LOG_LEVEL: 'warn',
        TETHER_PROXY: 'external',
        TETHER_CADDY_ADMIN_URL: caddy.adminUrl,
        TETHER_PROXY_TLS: 'off',
        TETHER_PROXY_HTTP_PORT: String(caddy.httpPort),
        TETHER_PROXY_ANSWERER_LISTEN: `127.0.0.1:${await freePort()}`,
      },
    });
    agentExposition = await waitFor(async () => {
      const text = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text(), () => null);
      // The gauge reads the state at scrape time; the counter moves on the 'ready' event that follows it.
      return text?.includes('tether_agent_session_connected 1') && text.includes('tether_agent_sessions_opened_total 1') && text.includes('tether_agent_proxy_answerer_up 1') ? text : null;
    }, { timeoutMs: 15_000 });
  }, 60_000);

  afterAll(async () => {
    await agentProcess?.destroy();
    await caddy?.stop();
    for (const a of agents) a.close();
    await panel?.close();
  });

  it('a live panel\'s /metrics passes promtool check metrics', () => {
    const r = promtool(['check', 'metrics'], exposition);
    expect(r.output).toBe('');
    expect(r.status).toBe(0);
    // prom-client's `_total` gauges are gone; the per-type gauges they summed stay.
    expect(exposition).not.toMatch(/^tether_panel_nodejs_active_handles_total/m);
    expect(exposition).toMatch(/^# TYPE tether_panel_nodejs_active_handles gauge/m);
  });

  it('a live agent\'s /metrics passes promtool check metrics', () => {
    const r = promtool(['check', 'metrics'], agentExposition);
    expect(r.output).toBe('');
    expect(r.status).toBe(0);
    expect(agentExposition).toMatch(/^tether_agent_sessions_opened_total 1$/m);
    expect(agentExposition).toMatch(/^# TYPE tether_agent_nodejs_eventloop_lag_p99_seconds gauge/m);
  });

  it('promtool refuses what the conventions refuse (the check can fail)', () => {
    const r = promtool(['check', 'metrics'], '# HELP x_total a gauge\n# TYPE x_total gauge\nx_total 1\n');
    expect(r.output).toMatch(/non-counter metrics should not have "_total" suffix/);
  });

  it('per-node series carry the node name, never a session id', () => {
    expect(exposition).toMatch(/^tether_node_sessions_opened_total\{node="prom-live"\} 1$/m);
    expect(exposition).toMatch(/^tether_nodes\{state="unreachable"\} 1$/m);
    expect(exposition).not.toMatch(/ses_[A-Za-z0-9_-]{12}/);
  });

  it('counts proxy reloads by whether the routing hash changed (the reload alert\'s input)', async () => {
    const agent = agents[0]!;
    const map = await agent.waitFor<Extract<PanelMessage, { type: 'routing.map' }>>((m) => m.type === 'routing.map');
    const applied = (n: number) =>
      agent.send({
        type: 'routing.applied',
        id: `ra${n}`,
        ref: map.id,
        hash: map.hash,
        changed: n === 1,
        reloaded: true,
        error: null,
        routing: { appliedHash: map.hash, reloadsTotal: n, reloadsToday: n, lastReloadAt: new Date().toISOString(), lastReloadReason: 'test' },
      });
    // First reload: from no hash to the map's (a routing change). Then a reload that kept the same hash.
    applied(1);
    agent.appliedHash = map.hash;
    // The second report is judged against the first: send it once the first is counted (a fixed pause raced a busy panel).
    await waitFor(async () => (await (await fetch(`${panel.url}/metrics`)).text()).includes('tether_node_proxy_reloads_total{node="prom-live",kind="routing_change"} 1'), { timeoutMs: 5_000 });
    applied(2);
    const text = await waitFor(async () => {
      const t = await (await fetch(`${panel.url}/metrics`)).text();
      return t.includes('tether_node_proxy_reloads_total{node="prom-live",kind="no_routing_change"} 1') ? t : null;
    }, { timeoutMs: 3_000 });
    expect(text).toMatch(/^tether_node_proxy_reloads_total\{node="prom-live",kind="routing_change"\} 1$/m);
    expect(text).toMatch(/^tether_node_proxy_reloads_total\{node="prom-gone",kind="no_routing_change"\} 0$/m);
  });

  it('the alert rules pass promtool check rules', () => {
    const r = promtool(['check', 'rules', 'alerts.yml'], undefined, promDir);
    expect(r.status, r.output).toBe(0);
    expect(r.output).toMatch(/SUCCESS: 13 rules found/);
  });

  it('every alert has a unit test, and promtool test rules passes', () => {
    const tests = readFileSync(path.join(promDir, 'alerts.test.yml'), 'utf8');
    for (const { name } of alertExpressions()) expect(tests, name).toMatch(new RegExp(`alertname: ${name}\\b`));
    const r = promtool(['test', 'rules', 'alerts.test.yml'], undefined, promDir);
    expect(r.status, r.output).toBe(0);
    expect(r.output).toMatch(/SUCCESS/);
  });

  it('every PromQL expression in the alerts and the Grafana board names metrics a live panel or agent exposes', () => {
    const names = new Set([...exposedNames(exposition), ...exposedNames(agentExposition)]);
    const expressions = [...alertExpressions(), ...boardExpressions()];
    expect(expressions.length).toBeGreaterThan(15);
    const unknown = expressions.flatMap(({ name, expr }) => metricNamesIn(expr).filter((m) => !names.has(m)).map((m) => `${name}: ${m}`));
    expect(unknown).toEqual([]);
  });
});
