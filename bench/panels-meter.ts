// What bench/panels.ts measures over a window, from outside the panels:
// NOTIFY messages (this process LISTENs on the panels' channel itself, so it
// sees each notification once, as every panel does), database writes
// (pg_stat_database and per-table pg_stat_user_tables deltas, and WAL bytes
// from pg_current_wal_lsn(), which has no statistics lag), heartbeats the
// panels took and their event-loop delay (their /metrics), and CPU seconds per second of each group of
// processes (/proc/<pid>/stat), so a saturated machine shows in the figures.
import { readFileSync } from 'node:fs';
import os from 'node:os';
import pg from 'pg';

const TICKS_PER_S = 100;

interface DbCounters {
  xacts: number;
  rows: number;
  walBytes: number;
  tables: Map<string, number>;
}

export interface Snapshot {
  at: number;
  notify: Map<string, number>;
  db: DbCounters;
  /** CPU seconds so far per process, by group label. */
  cpu: Map<string, Map<number, number>>;
  panels: PanelFigures;
}

/** Heartbeats the live panels took so far, and each one's event-loop delay p99 (ms) since its previous scrape. */
export interface PanelFigures {
  heartbeats: number;
  loopP99Ms: number[];
  /** A rare stall (a periodic read of the whole fleet) hides below the p99: the max shows it. */
  loopMaxMs: number[];
}

/** Seconds of CPU (user + system) a process used so far; 0 once it is gone. */
function cpuSeconds(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_S;
  } catch {
    return 0;
  }
}

/** The kernel's count of connections dropped because a listen queue was full (whole machine: other jobs' too). */
export function listenOverflows(): number {
  const lines = readFileSync('/proc/net/netstat', 'utf8').split('\n').filter((l) => l.startsWith('TcpExt:'));
  const [names, values] = lines.map((l) => l.split(' '));
  return Number(values?.[names?.indexOf('ListenOverflows') ?? -1] ?? NaN);
}

export class Meter {
  private readonly notify = new Map<string, number>();

  private constructor(
    private readonly client: pg.Client,
    private readonly listener: pg.Client,
    /** Process groups whose CPU is shown, by label (re-read each snapshot: PostgreSQL backends come and go). */
    private readonly groups: () => Promise<Map<string, number[]>>,
    private readonly scrape: () => Promise<PanelFigures>,
  ) {}

  static async start(dbUrl: string, client: pg.Client, groups: () => Promise<Map<string, number[]>>, scrape: () => Promise<PanelFigures>): Promise<Meter> {
    const listener = new pg.Client({ connectionString: dbUrl, application_name: 'bench-listen' });
    await listener.connect();
    const meter = new Meter(client, listener, groups, scrape);
    listener.on('notification', (n) => {
      const kind = n.payload?.split(':', 1)[0] ?? '?';
      meter.notify.set(kind, (meter.notify.get(kind) ?? 0) + 1);
    });
    await listener.query('LISTEN tether_panels');
    return meter;
  }

  /** PIDs of this cluster's PostgreSQL backends and workers (not other benches' servers). */
  static async postgresPids(client: pg.Client): Promise<number[]> {
    const { rows } = await client.query<{ pid: number }>('SELECT pid FROM pg_stat_activity');
    return rows.map((r) => r.pid);
  }

  async snapshot(): Promise<Snapshot> {
    // Let backends flush their pending statistics (they do so at most once a second while busy).
    await new Promise((r) => setTimeout(r, 1_100));
    const { rows } = await this.client.query<{ xacts: string; rows: string; wal: string }>(
      `SELECT xact_commit + xact_rollback AS xacts, tup_inserted + tup_updated + tup_deleted AS rows,
              pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0') AS wal
       FROM pg_stat_database WHERE datname = current_database()`,
    );
    const tables = await this.client.query<{ relname: string; n: string }>('SELECT relname, n_tup_ins + n_tup_upd + n_tup_del AS n FROM pg_stat_user_tables');
    const cpu = new Map<string, Map<number, number>>();
    for (const [label, pids] of await this.groups()) cpu.set(label, new Map(pids.map((pid) => [pid, cpuSeconds(pid)])));
    return {
      at: Date.now(),
      notify: new Map(this.notify),
      db: { xacts: Number(rows[0]!.xacts), rows: Number(rows[0]!.rows), walBytes: Number(rows[0]!.wal), tables: new Map(tables.rows.map((t) => [t.relname, Number(t.n)])) },
      cpu,
      panels: await this.scrape(),
    };
  }

  /** One line of rates between two snapshots. */
  static describe(a: Snapshot, b: Snapshot): string {
    const s = (b.at - a.at) / 1000;
    const rate = (x: number) => (x / s).toFixed(x / s < 10 ? 1 : 0);
    const kinds = [...b.notify].map(([k, n]) => [k, n - (a.notify.get(k) ?? 0)] as const).filter(([, n]) => n > 0);
    const notifyTotal = kinds.reduce((t, [, n]) => t + n, 0);
    const tables = [...b.db.tables]
      .map(([t, n]) => [t, n - (a.db.tables.get(t) ?? 0)] as const)
      .filter(([, n]) => n > 0)
      .sort((x, y) => y[1] - x[1])
      .slice(0, 5);
    // Per process present at both ends (a process that started meanwhile counts from 0, one that ended is lost).
    const used = (label: string, now: Map<number, number>) => [...now].reduce((t, [pid, v]) => t + v - (a.cpu.get(label)?.get(pid) ?? 0), 0);
    const cpu = [...b.cpu].map(([label, now]) => `${label} ${(used(label, now) / s).toFixed(2)}`);
    return (
      `${s.toFixed(0)} s: heartbeats ${rate(b.panels.heartbeats - a.panels.heartbeats)}/s; ` +
      `panels' event-loop delay p99 ${b.panels.loopP99Ms.map((ms) => ms.toFixed(0)).join(' / ')} ms, max ${b.panels.loopMaxMs.map((ms) => ms.toFixed(0)).join(' / ')} ms; ` +
      `NOTIFY ${rate(notifyTotal)}/s (${kinds.map(([k, n]) => `${k} ${rate(n)}`).join(', ') || 'none'}); ` +
      `database ${rate(b.db.xacts - a.db.xacts)} transactions/s, ${rate(b.db.rows - a.db.rows)} rows written/s ` +
      `(${tables.map(([t, n]) => `${t} ${rate(n)}`).join(', ') || 'none'}), WAL ${rate((b.db.walBytes - a.db.walBytes) / 1024)} KiB/s; ` +
      `CPU s/s ${cpu.join(', ')}; load ${os.loadavg().map((l) => l.toFixed(1)).join(' ')}`
    );
  }

  /** What this database's active backends are doing now (state or wait event) and their statements' first words: counts, to sum over samples. */
  async activity(into: Map<string, number>): Promise<void> {
    const { rows } = await this.client.query<{ what: string }>(
      `SELECT coalesce(wait_event_type || ':' || wait_event, 'cpu') || ' ' || left(regexp_replace(query, '\\s+', ' ', 'g'), 40) AS what
       FROM pg_stat_activity WHERE state = 'active' AND pid <> pg_backend_pid() AND datname = current_database()`,
    );
    for (const r of rows) into.set(r.what, (into.get(r.what) ?? 0) + 1);
  }

  async stop(): Promise<void> {
    await this.listener.end().catch(() => undefined);
  }
}
