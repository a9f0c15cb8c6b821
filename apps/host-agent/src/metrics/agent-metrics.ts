import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { dropNonConventionalDefaults } from '@tether/common';
import { RELOAD_KIND_COUNT_KEY, RELOAD_KINDS, closeCodeName, type RoutingStatus } from '@tether/protocol';
import type { PanelConnection } from '../connection/panel-connection.js';
import type { AnswererHealth } from '../controllers.js';

// The agent's Prometheus metrics (served only when TETHER_AGENT_METRICS_PORT
// is set, see metrics-server.ts). Same conventions as the panel's:
// `tether_agent_` runtime metrics without prom-client's `_total` gauges, base
// units, `_total` only on counters, no session ids in labels.

export const AGENT_METRICS_PREFIX = 'tether_agent_';

/** What the metrics read from the running agent. */
export interface AgentMetricsSource {
  connection: Pick<PanelConnection, 'state' | 'on'>;
  routing(): RoutingStatus;
  /** Static routing only. */
  answerer?: () => AnswererHealth;
  /** Drains of this agent run (a Docker runtime only). */
  drains?: () => { ended: number; connectionsCut: number };
}

export function createAgentMetrics(source: AgentMetricsSource): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: AGENT_METRICS_PREFIX });
  dropNonConventionalDefaults(registry, AGENT_METRICS_PREFIX);
  const registers = [registry];
  new Gauge({
    name: 'tether_agent_session_connected',
    help: '1 while the agent has a session with the panel (welcome received), 0 otherwise',
    registers,
    collect() {
      this.set(source.connection.state === 'ready' ? 1 : 0);
    },
  });
  const opened = new Counter({ name: 'tether_agent_sessions_opened_total', help: 'Sessions with the panel that completed hello/welcome', registers });
  const closed = new Counter({
    name: 'tether_agent_session_closes_total',
    help: 'Sessions with the panel that ended, by close code name (or the number when it has none)',
    labelNames: ['reason'],
    registers,
  });
  // The agent's reload counter persists across restarts (routing-state.json), so it is a counter here too.
  new Counter({
    name: 'tether_agent_proxy_reloads_total',
    help: 'Caddy reloads this node made, since its state folder was created',
    registers,
    collect() {
      this.reset();
      this.inc(source.routing().reloadsTotal);
    },
  });
  new Gauge({
    name: 'tether_agent_proxy_reloads_today',
    help: 'Disruptive Caddy reloads (kinds change and repair-drift) this node made today (UTC)',
    registers,
    collect() {
      this.set(source.routing().reloadsToday);
    },
  });
  new Counter({
    name: 'tether_agent_proxy_reloads_by_kind_total',
    help: 'Caddy reloads this node made by kind (initial, repair-empty, change, repair-drift, static-move), persisted across agent restarts',
    labelNames: ['kind'],
    registers,
    collect() {
      this.reset();
      const kinds = source.routing().reloadKinds;
      if (kinds) for (const kind of RELOAD_KINDS) this.inc({ kind }, kinds[RELOAD_KIND_COUNT_KEY[kind]] ?? 0);
    },
  });
  // Registered only for an agent that runs the canary (fixed for the agent's run), so "off" is no series, not 0.
  if (source.routing().canary) registerCanaryMetrics(source, registers);
  if (source.answerer) registerAnswererMetrics(source.answerer, registers);
  if (source.drains) registerDrainMetrics(source.drains, registers);
  source.connection.on('ready', () => opened.inc());
  source.connection.on('closed', ({ code }) => closed.inc({ reason: closeCodeName(code) ?? String(code) }));
  return registry;
}

function registerCanaryMetrics(source: AgentMetricsSource, registers: Registry[]): void {
  new Gauge({
    name: 'tether_agent_canary_connected',
    help: "1 while the canary WebSocket through this node's own Caddy is open, 0 while not; absent when the canary is off",
    registers,
    collect() {
      this.set(source.routing().canary?.connected ? 1 : 0);
    },
  });
  const causeLabels = { reload: 'reload', proxyRestarted: 'proxy-restarted', proxyUnreachable: 'proxy-unreachable', unexplained: 'unexplained' } as const;
  new Counter({
    name: 'tether_agent_canary_drops_total',
    help: "Drops of the canary connection through this node's own Caddy, by cause, persisted across agent restarts",
    labelNames: ['cause'],
    registers,
    collect() {
      this.reset();
      const canary = source.routing().canary;
      if (canary) for (const [key, cause] of Object.entries(causeLabels)) this.inc({ cause }, canary.causesTotal[key as keyof typeof causeLabels]);
    },
  });
}

/** Static routing's answerer (docs/operations.md, "Static proxy"): alert on up == 0 and on restarts growing. */
function registerAnswererMetrics(answerer: () => AnswererHealth, registers: Registry[]): void {
  new Gauge({
    name: 'tether_agent_proxy_answerer_up',
    help: "1 when the last probe of the static proxy's answerer (knotd) got an answer, 0 otherwise",
    registers,
    collect() {
      this.set(answerer().up ? 1 : 0);
    },
  });
  new Counter({
    name: 'tether_agent_proxy_answerer_restarts_total',
    help: 'Answerer restarts after it stopped answering (crash, kill, freeze), this agent run',
    registers,
    collect() {
      this.reset();
      this.inc(answerer().restarts);
    },
  });
  new Gauge({
    name: 'tether_agent_proxy_routes_unserved',
    help: 'Routes whose service has no ready container at the last answers write (answered no-upstream)',
    registers,
    collect() {
      this.set(answerer().unserved);
    },
  });
  new Gauge({
    name: 'tether_agent_proxy_routes_legacy',
    help: 'Routes outside the static shape, rendered into the config (their changes reload)',
    registers,
    collect() {
      this.set(answerer().legacy);
    },
  });
}

/** Drains (capability workload.drain): what deploys cut, the figure every deployment also carries. */
function registerDrainMetrics(drains: NonNullable<AgentMetricsSource['drains']>, registers: Registry[]): void {
  new Counter({
    name: 'tether_agent_drains_total',
    help: 'Drains of old containers after a rollout switch that ended (containers stopped), this agent run',
    registers,
    collect() {
      this.reset();
      this.inc(drains().ended);
    },
  });
  new Counter({
    name: 'tether_agent_drain_connections_cut_total',
    help: "Proxied requests and streams still open on old containers when their drain's deadline fell (counted per container: static proxy only), this agent run",
    registers,
    collect() {
      this.reset();
      this.inc(drains().connectionsCut);
    },
  });
}
