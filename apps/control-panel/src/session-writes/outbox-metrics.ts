import { Counter, Gauge } from 'prom-client';
import type { PanelMetrics } from '../panel-metrics.js';
import type { SessionFactOutbox } from './outbox.js';

/** What an operator watches during a database outage: facts waiting, and facts that went to the spill file. */
export function watchOutbox(metrics: PanelMetrics, outbox: SessionFactOutbox): void {
  const registers = [metrics.registry];
  new Gauge({
    name: 'tether_session_facts_pending',
    help: 'Session facts (opens, closes, deployment transitions, reloads, last-seen and last-used times) waiting for the database',
    registers,
    collect() {
      this.set(outbox.pending);
    },
  });
  new Counter({
    name: 'tether_session_facts_spilled_total',
    help: 'Session facts appended to the outbox spill file because the database refused them',
    registers,
    collect() {
      this.reset();
      this.inc(outbox.stats.spilled);
    },
  });
}
