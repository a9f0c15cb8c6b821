import { Counter, Gauge } from 'prom-client';
import type { PanelMetrics } from '../panel-metrics.js';
import type { Brake } from '../scheduling/failover-policy.js';
import type { Scheduler } from './scheduler-loop.js';

/**
 * Failover as the scheduler holder's last evaluation saw it (issue 38): whether a brake holds re-placements back
 * while nodes are unreachable (the alert TetherFailoverHeld), how many nodes are unreachable and not yet lost, and
 * the lost replicas re-placed. Only the panel that holds the scheduler lease exposes the two gauges; the count is
 * each panel's own.
 */
const BRAKE_REASONS = ['TOO_MANY_UNREACHABLE', 'MANY_UNREACHABLE_RECENTLY', 'PANEL_STARTED', 'DATABASE_RECOVERED'] as const satisfies readonly Brake['reason'][];

export function watchFailover(metrics: PanelMetrics, scheduler: Pick<Scheduler, 'lease' | 'failover'>): void {
  const registers = [metrics.registry];
  const status = () => (scheduler.lease.held ? scheduler.failover : null);
  new Gauge({
    name: 'tether_scheduler_failover_held',
    help: "1 while failover is held by this brake with nodes unreachable (their stateless replicas are not re-placed), else 0; on the scheduler holder only",
    labelNames: ['reason'],
    registers,
    collect() {
      this.reset();
      const s = status();
      if (!s) return;
      const held = s.brake && s.unreachable.length > 0 ? s.brake.reason : null;
      for (const reason of BRAKE_REASONS) this.set({ reason }, reason === held ? 1 : 0);
    },
  });
  new Gauge({
    name: 'tether_scheduler_nodes_unreachable',
    help: 'Nodes with no live session on any panel that failover does not count lost (yet: within the grace, or held by a brake)',
    registers,
    collect() {
      this.reset();
      const s = status();
      if (s) this.set(s.unreachable.length);
    },
  });
  new Counter({
    name: 'tether_scheduler_replicas_replaced_total',
    help: "Replicas of lost nodes re-placed elsewhere by this panel's scheduler since the panel started",
    registers,
    collect() {
      this.reset();
      this.inc(scheduler.failover?.replaced ?? 0);
    },
  });
}
