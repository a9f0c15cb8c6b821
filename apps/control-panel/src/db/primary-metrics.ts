import { Counter, Gauge } from 'prom-client';
import type { PanelMetrics } from '../panel-metrics.js';
import type { PrimaryLocator } from './primary-locator.js';

// Which database server this panel writes to, read at scrape time from the
// locator the pool, lease and LISTEN follow (issue 39): the server and its
// timeline, how often the primary changed, and old primaries refused.

export function watchPrimary(metrics: PanelMetrics, locator: PrimaryLocator): void {
  const registers = [metrics.registry];
  new Gauge({
    name: 'tether_db_primary_timeline',
    help: 'Timeline of the database server this panel writes to, labelled with that server (host:port); no series while none is reached',
    labelNames: ['server'],
    registers,
    collect() {
      this.reset();
      const current = locator.current;
      if (current) this.set({ server: `${current.host}:${current.port}` }, current.timeline);
    },
  });
  new Counter({
    name: 'tether_db_failovers_total',
    help: 'Times this panel moved to another database server or a higher timeline (a promotion) since it started',
    registers,
    collect() {
      this.reset();
      this.inc(locator.failovers);
    },
  });
  new Counter({
    name: 'tether_db_stale_primary_refused_total',
    help: 'Database servers refused for a timeline lower than one this panel saw (an old primary back, writable)',
    registers,
    collect() {
      this.reset();
      this.inc(locator.staleRefused);
    },
  });
}
