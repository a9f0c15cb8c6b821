import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensurePromtool, repoRoot, waitFor } from '@tether/testkit';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { exposedNames, metricNamesIn, promtool } from './helpers/promql.js';
import { RawAgent } from './helpers/raw-agent.js';

// Prometheus conventions on a live panel's /metrics (promtool check metrics),
// the alert rules (promtool check rules, and a unit test per alert), and that
// every PromQL expression in the alerts and the Grafana board names a metric
// a live panel exposes.

const ready = (await ensurePromtool()).available;
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

describe.skipIf(!ready)('Prometheus artefacts', () => {
  let panel: Panel;
  let agents: RawAgent[] = [];
  let exposition = '';

  beforeAll(async () => {
    panel = await startPanel({ env: { TETHER_FLEET_REFRESH_MS: '200', TETHER_SESSION_IDLE_MS: '600' } });
    const live = await panel.createNode('prom-live');
    const gone = await panel.createNode('prom-gone');
    agents = [
      await RawAgent.connect({ url: panel.url, token: live.token, node: live.name, heartbeatMs: 100 }),
      await RawAgent.connect({ url: panel.url, token: gone.token, node: gone.name }),
    ];
    // One goes silent: the per-node series then show a reachable and an unreachable node.
    agents[1]!.goSilent();
    await agents[1]!.waitClosed(5_000);
    exposition = await waitFor(async () => {
      const text = await (await fetch(`${panel.url}/metrics`)).text();
      return text.includes('tether_node_reachable{node="prom-gone"} 0') && text.includes('tether_node_reachable{node="prom-live"} 1') ? text : null;
    }, { timeoutMs: 5_000 });
  }, 60_000);

  afterAll(async () => {
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

  it('promtool refuses what the conventions refuse (the check can fail)', () => {
    const r = promtool(['check', 'metrics'], '# HELP x_total a gauge\n# TYPE x_total gauge\nx_total 1\n');
    expect(r.output).toMatch(/non-counter metrics should not have "_total" suffix/);
  });

  it('per-node series carry the node name, never a session id', () => {
    expect(exposition).toMatch(/^tether_node_sessions_opened_total\{node="prom-live"\} 1$/m);
    expect(exposition).toMatch(/^tether_nodes\{state="unreachable"\} 1$/m);
    expect(exposition).not.toMatch(/ses_[A-Za-z0-9_-]{12}/);
  });

  it('the alert rules pass promtool check rules', () => {
    const r = promtool(['check', 'rules', 'alerts.yml'], undefined, promDir);
    expect(r.status, r.output).toBe(0);
    expect(r.output).toMatch(/SUCCESS: 5 rules found/);
  });

  it('every alert has a unit test, and promtool test rules passes', () => {
    const tests = readFileSync(path.join(promDir, 'alerts.test.yml'), 'utf8');
    for (const { name } of alertExpressions()) expect(tests, name).toMatch(new RegExp(`alertname: ${name}\\b`));
    const r = promtool(['test', 'rules', 'alerts.test.yml'], undefined, promDir);
    expect(r.status, r.output).toBe(0);
    expect(r.output).toMatch(/SUCCESS/);
  });

  it('every PromQL expression in the alerts and the Grafana board names metrics a live panel exposes', () => {
    const names = exposedNames(exposition);
    const expressions = [...alertExpressions(), ...boardExpressions()];
    expect(expressions.length).toBeGreaterThan(15);
    const unknown = expressions.flatMap(({ name, expr }) => metricNamesIn(expr).filter((m) => !names.has(m)).map((m) => `${name}: ${m}`));
    expect(unknown).toEqual([]);
  });
});
