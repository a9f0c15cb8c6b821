import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { dropNonConventionalDefaults } from '@tether/common';
import type { ReloadKind } from '@tether/protocol';

// Prometheus metrics, on a registry made per app (no global registry bound at
// import), served at GET /metrics. Names follow the Prometheus conventions
// (`tether_` prefix, base units, `_total` only on counters; `promtool check
// metrics` runs on a live panel's output in CI). Per-node series carry the
// node's name as `node`: bounded by the fleet size, never a session id.
// docs/operations.md lists every metric.

export const PANEL_METRICS_PREFIX = 'tether_panel_';

/** What the per-node gauges read at scrape time (the fleet page's rows). */
export interface FleetGaugeSource {
  nodes(): Iterable<{ name: string; state: 'reachable' | 'unreachable' | 'never_connected' | 'decommissioned'; drifting: boolean; unhealthy: number }>;
  /** Routes of this panel's live sessions with a probe no older than two intervals (capability `routes.probe`). */
  routes?(): Iterable<{
    node: string;
    domain: string;
    pathPrefix: string | null;
    up: boolean;
    latencyMs: number;
    certificate: { notAfter: string | null; lastError: string | null } | null;
  }>;
}

/**
 * The metric's kind of each agent reload kind, the one table of it: `change`
 * changed routing, `repair-drift` reloaded without a routing change (the
 * disruptive symptom of incident 2, which the alert counts); an initial load
 * and the repair of an empty (restarted) Caddy sever nothing and have their own values.
 */
export const RELOAD_METRIC_KIND = {
  change: 'routing_change',
  'repair-drift': 'no_routing_change',
  initial: 'initial',
  'repair-empty': 'repair_empty',
  'static-move': 'static_move',
} as const satisfies Record<ReloadKind, string>;
/** The kinds of proxy reload the panel counts (label `kind` of tether_node_proxy_reloads_total). */
export type ReloadMetricKind = (typeof RELOAD_METRIC_KIND)[ReloadKind];
export const RELOAD_METRIC_KINDS: readonly ReloadMetricKind[] = Object.values(RELOAD_METRIC_KIND);

export interface PanelMetrics {
  registry: Registry;
  sessionsConnected: Gauge;
  sessionsOpened: Counter;
  sessionTeardowns: Counter<'reason'>;
  framesReceived: Counter<'type'>;
  invalidFrames: Counter<'code'>;
  upgradesRefusedBusy: Counter;
  /** Connections and upgrades refused at the edge before any authentication, by code. */
  edgeRefusals: Counter<'code'>;
  deployDispatches: Counter<'outcome'>;
  ackWait: Histogram;
  nodeSessionsOpened: Counter<'node'>;
  nodeAckTimeouts: Counter<'node'>;
  nodeProxyReloads: Counter<'node' | 'kind'>;
  nodeCanaryDrops: Counter<'node' | 'cause'>;
  nodeRoutingPushes: Counter<'node' | 'outcome'>;
  /** Drains an agent reported (deploy.drained, each once), by whether its proxy counted connections. */
  nodeDrains: Counter<'node' | 'counted'>;
  /** Connections the reported drains cut at their deadline. */
  nodeDrainConnectionsCut: Counter<'node'>;
  dashboardStreams: Gauge;
  dashboardStreamsDropped: Counter<'reason'>;
  /** Where the per-node gauges read from (the fleet view); no per-node gauges until set. */
  setFleetSource(source: FleetGaugeSource): void;
}

export function createMetrics(options: { defaultMetrics?: boolean } = {}): PanelMetrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) {
    collectDefaultMetrics({ register: registry, prefix: PANEL_METRICS_PREFIX });
    dropNonConventionalDefaults(registry, PANEL_METRICS_PREFIX);
  }
  let fleet: FleetGaugeSource | undefined;
  const registers = [registry];
  new Gauge({
    name: 'tether_nodes',
    help: 'Nodes by state (reachable = a live session in this panel\'s connected map)',
    labelNames: ['state'],
    registers,
    collect() {
      this.reset();
      if (!fleet) return;
      const counts = { reachable: 0, unreachable: 0, never_connected: 0, decommissioned: 0 };
      for (const n of fleet.nodes()) counts[n.state]++;
      for (const [state, n] of Object.entries(counts)) this.set({ state }, n);
    },
  });
  new Gauge({
    name: 'tether_node_reachable',
    help: '1 while the node has a live session, 0 while it is unreachable (nodes that never connected or are decommissioned are left out)',
    labelNames: ['node'],
    registers,
    collect() {
      this.reset();
      if (!fleet) return;
      for (const n of fleet.nodes()) {
        if (n.state === 'reachable' || n.state === 'unreachable') this.set({ node: n.name }, n.state === 'reachable' ? 1 : 0);
      }
    },
  });
  new Gauge({
    name: 'tether_node_routing_drifting',
    help: '1 while the node\'s applied routing hash has differed from the desired one for longer than one push cycle',
    labelNames: ['node'],
    registers,
    collect() {
      this.reset();
      if (!fleet) return;
      for (const n of fleet.nodes()) if (n.state === 'reachable') this.set({ node: n.name }, n.drifting ? 1 : 0);
    },
  });
  new Gauge({
    name: 'tether_node_containers_unhealthy',
    help: 'Running containers on the node whose HTTP health check (or image HEALTHCHECK) fails now, as its live session last reported',
    labelNames: ['node'],
    registers,
    collect() {
      this.reset();
      if (!fleet) return;
      for (const n of fleet.nodes()) if (n.state === 'reachable') this.set({ node: n.name }, n.unhealthy);
    },
  });
  const routeLabels = ['node', 'domain', 'path_prefix'] as const;
  const routeSeries = () => (fleet?.routes ? [...fleet.routes()] : []);
  new Gauge({
    name: 'tether_route_up',
    help: "1 while the route's last probe through its host's proxy got an answer the app made below 500, 0 while it fails; left out while unknown (no live session, no fresh probe)",
    labelNames: routeLabels,
    registers,
    collect() {
      this.reset();
      for (const r of routeSeries()) this.set({ node: r.node, domain: r.domain, path_prefix: r.pathPrefix ?? '' }, r.up ? 1 : 0);
    },
  });
  new Gauge({
    name: 'tether_route_probe_duration_seconds',
    help: "How long the route's last probe through its host's proxy took (an answer, an error or the timeout)",
    labelNames: routeLabels,
    registers,
    collect() {
      this.reset();
      for (const r of routeSeries()) this.set({ node: r.node, domain: r.domain, path_prefix: r.pathPrefix ?? '' }, r.latencyMs / 1000);
    },
  });
  // Per domain (a domain's routes share its certificate): the first fresh probe of the domain that saw one.
  const certificates = () => {
    const byDomain = new Map<string, { node: string; domain: string; notAfter: string | null; lastError: string | null }>();
    for (const r of routeSeries()) if (r.certificate && !byDomain.has(`${r.node} ${r.domain}`)) byDomain.set(`${r.node} ${r.domain}`, { node: r.node, domain: r.domain, ...r.certificate });
    return [...byDomain.values()];
  };
  new Gauge({
    name: 'tether_route_certificate_expiry_seconds',
    help: "Seconds until the certificate of the domain (as the route probe's TLS handshake last saw it) expires; negative once expired",
    labelNames: ['node', 'domain'],
    registers,
    collect() {
      this.reset();
      const now = Date.now();
      for (const c of certificates()) if (c.notAfter) this.set({ node: c.node, domain: c.domain }, Math.round((Date.parse(c.notAfter) - now) / 1000));
    },
  });
  new Gauge({
    name: 'tether_route_certificate_error',
    help: "1 while the domain's last probe over TLS failed its handshake (no certificate could be presented: issuance failing), 0 otherwise",
    labelNames: ['node', 'domain'],
    registers,
    collect() {
      this.reset();
      for (const c of certificates()) this.set({ node: c.node, domain: c.domain }, c.lastError === null ? 0 : 1);
    },
  });
  return {
    registry,
    setFleetSource(source) {
      fleet = source;
    },
    sessionsConnected: new Gauge({ name: 'tether_sessions_connected', help: 'Agent sessions in the connected map', registers }),
    sessionsOpened: new Counter({ name: 'tether_sessions_opened_total', help: 'Agent sessions opened', registers }),
    sessionTeardowns: new Counter({
      name: 'tether_session_teardowns_total',
      help: 'Agent sessions closed, by close reason',
      labelNames: ['reason'],
      registers,
    }),
    framesReceived: new Counter({ name: 'tether_frames_received_total', help: 'Valid agent frames', labelNames: ['type'], registers }),
    invalidFrames: new Counter({ name: 'tether_invalid_frames_total', help: 'Rejected agent frames', labelNames: ['code'], registers }),
    upgradesRefusedBusy: new Counter({ name: 'tether_agent_upgrades_refused_busy_total', help: 'Agent upgrades answered 503 because too many sessions were opening', registers }),
    edgeRefusals: new Counter({
      name: 'tether_edge_refusals_total',
      help: 'Connections and upgrades refused before authentication (TOO_MANY_CONNECTIONS, UPGRADE_NOT_ALLOWED)',
      labelNames: ['code'],
      registers,
    }),
    deployDispatches: new Counter({
      name: 'tether_deploy_dispatches_total',
      help: 'Deployments dispatched, by outcome',
      labelNames: ['outcome'],
      registers,
    }),
    ackWait: new Histogram({
      name: 'tether_deploy_ack_seconds',
      help: 'Time from sending a deploy to its ACK',
      buckets: [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10],
      registers,
    }),
    nodeSessionsOpened: new Counter({
      name: 'tether_node_sessions_opened_total',
      help: 'Agent sessions opened, per node (many per hour = a flapping session)',
      labelNames: ['node'],
      registers,
    }),
    nodeAckTimeouts: new Counter({
      name: 'tether_node_ack_timeouts_total',
      help: 'Sessions killed because a deploy, workloads or routing.map frame was not ACKed in time, per node',
      labelNames: ['node'],
      registers,
    }),
    nodeProxyReloads: new Counter({
      name: 'tether_node_proxy_reloads_total',
      help: `Proxy (Caddy) reloads an agent reported, per node, by kind (${RELOAD_METRIC_KINDS.join(', ')})`,
      labelNames: ['node', 'kind'],
      registers,
    }),
    nodeDrains: new Counter({
      name: 'tether_node_drains_total',
      help: "Rollout drains an agent reported (deploy.drained, each deployment once), per node, by whether its proxy counted connections (yes, no)",
      labelNames: ['node', 'counted'],
      registers,
    }),
    nodeDrainConnectionsCut: new Counter({
      name: 'tether_node_drain_connections_cut_total',
      help: 'Connections (proxied requests and streams) still open on old containers when their drain deadline fell, per node',
      labelNames: ['node'],
      registers,
    }),
    nodeRoutingPushes: new Counter({
      name: 'tether_node_routing_pushes_total',
      help: 'Routing maps pushed to a node, by outcome: sent, applied (routing.applied without error), failed (an error, or not delivered)',
      labelNames: ['node', 'outcome'],
      registers,
    }),
    nodeCanaryDrops: new Counter({
      name: 'tether_node_canary_drops_total',
      help: "Drops of an agent's canary connection through its own proxy, per node, by cause",
      labelNames: ['node', 'cause'],
      registers,
    }),
    dashboardStreams: new Gauge({ name: 'tether_dashboard_streams', help: 'Open fleet-page event streams', registers }),
    dashboardStreamsDropped: new Counter({
      name: 'tether_dashboard_streams_dropped_total',
      help: 'Fleet-page event streams the panel ended, by reason (slow_client, signed_out)',
      labelNames: ['reason'],
      registers,
    }),
  };
}
