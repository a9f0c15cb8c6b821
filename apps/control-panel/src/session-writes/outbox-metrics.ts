import { Counter, Gauge, Summary } from 'prom-client';
import type { PanelMetrics } from '../panel-metrics.js';
import type { SessionFactOutbox } from './outbox.js';

/**
 * What an operator watches during a database outage: facts waiting, and facts
 * that went to the spill file; and how long a durable fact waits for its
 * commit (a deploy's 202 waits for two: dispatched, delivered).
 */
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
  const commit = new Summary({
    name: 'tether_session_fact_commit_seconds',
    help: 'Seconds from a durable session fact submitted to the outbox to its commit, by kind (the last 60 s)',
    labelNames: ['kind'],
    percentiles: [0.5, 0.9, 0.99, 1],
    maxAgeSeconds: 60,
    ageBuckets: 6,
    registers,
  });
  outbox.onCommitted = (kind, waitedMs) => commit.observe({ kind }, waitedMs / 1000);
}
