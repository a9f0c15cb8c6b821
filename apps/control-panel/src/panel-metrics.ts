import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

// Prometheus metrics, on a registry made per app (no global registry bound at
// import), served at GET /metrics.

export interface PanelMetrics {
  registry: Registry;
  sessionsConnected: Gauge;
  sessionsOpened: Counter;
  sessionTeardowns: Counter<'reason'>;
  framesReceived: Counter<'type'>;
  invalidFrames: Counter<'code'>;
  deployDispatches: Counter<'outcome'>;
  ackWait: Histogram;
}

export function createMetrics(options: { defaultMetrics?: boolean } = {}): PanelMetrics {
  const registry = new Registry();
  if (options.defaultMetrics ?? true) collectDefaultMetrics({ register: registry, prefix: 'tether_panel_' });
  return {
    registry,
    sessionsConnected: new Gauge({ name: 'tether_sessions_connected', help: 'Agent sessions in the connected map', registers: [registry] }),
    sessionsOpened: new Counter({ name: 'tether_sessions_opened_total', help: 'Agent sessions opened', registers: [registry] }),
    sessionTeardowns: new Counter({
      name: 'tether_session_teardowns_total',
      help: 'Agent sessions closed, by close reason',
      labelNames: ['reason'],
      registers: [registry],
    }),
    framesReceived: new Counter({ name: 'tether_frames_received_total', help: 'Valid agent frames', labelNames: ['type'], registers: [registry] }),
    invalidFrames: new Counter({ name: 'tether_invalid_frames_total', help: 'Rejected agent frames', labelNames: ['code'], registers: [registry] }),
    deployDispatches: new Counter({
      name: 'tether_deploy_dispatches_total',
      help: 'Deployments dispatched, by outcome',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    ackWait: new Histogram({
      name: 'tether_deploy_ack_seconds',
      help: 'Time from sending a deploy to its ACK',
      buckets: [0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10],
      registers: [registry],
    }),
  };
}
