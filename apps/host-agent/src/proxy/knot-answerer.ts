import { execFile, spawn } from 'node:child_process';
import { Resolver } from 'node:dns/promises';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { sleep, type Logger } from '@tether/common';
import { readFileIfExists, writeFileAtomic } from '../state/atomic-file.js';
import { ProxyError } from './errors.js';
import { ANSWER_ZONE, HEALTH_NAME } from './static-answers.js';

// The answerer Caddy asks per request (docs/architecture.md, "Static proxy"):
// Debian's knotd, a maintained authoritative DNS server, run as its own
// process in its own session so that an agent killed, frozen or restarted
// leaves it answering. The agent only writes its zone file (temp + rename)
// and asks it to reload with `knotc -b`; knotd parses the new file before it
// replaces the zone it serves and keeps the last good one when the file is
// broken, which the agent sees as a refused reload and a serial that did not
// move. Supervision: ensure() probes it over DNS and, when it does not answer
// (gone, crashed, frozen), kills what is left by its pid file and starts a new one.

const execFileAsync = promisify(execFile);

export interface KnotAnswererOptions {
  /** Folder of knot.conf, the zone, its database, pid file, control socket and log. */
  dir: string;
  /** Where knotd listens (UDP and TCP), `host:port`; Caddy's resolver address. */
  listen: { host: string; port: number };
  knotd: string;
  knotc: string;
  /** Bound on one health probe (a DNS query). */
  probeTimeoutMs: number;
  /** How long a started knotd may take to answer. */
  startTimeoutMs?: number;
  logger: Logger;
}

export interface AnswererStatus {
  /** The last probe got an answer. */
  up: boolean;
  /** knotd processes started by this agent run (the first start included). */
  starts: number;
  /** Starts after a failed probe of a knotd that had been answering (crash, kill, freeze). */
  restarts: number;
  lastFailure: string | null;
  lastFailureAt: string | null;
  /** SOA serial served at the last probe. */
  serial: number | null;
}

export class KnotAnswerer {
  readonly paths: { conf: string; zone: string; pid: string; socket: string; log: string; db: string };
  private readonly state: AnswererStatus = { up: false, starts: 0, restarts: 0, lastFailure: null, lastFailureAt: null, serial: null };
  private inFlight: Promise<void> | null = null;

  constructor(private readonly options: KnotAnswererOptions) {
    const d = options.dir;
    this.paths = {
      conf: path.join(d, 'knot.conf'),
      zone: path.join(d, 'zones', `${ANSWER_ZONE}.zone`),
      pid: path.join(d, 'knot.pid'),
      socket: path.join(d, 'knot.sock'),
      log: path.join(d, 'knot.log'),
      db: path.join(d, 'db'),
    };
  }

  /** `udp/host:port`, the form Caddy's resolver takes. */
  get caddyAddress(): string {
    const { host, port } = this.options.listen;
    return `udp/${host.includes(':') ? `[${host}]` : host}:${port}`;
  }

  status(): AnswererStatus {
    return { ...this.state };
  }

  /** The SOA serial knotd serves now; throws when it does not answer within the probe timeout. */
  async probe(): Promise<number> {
    const resolver = new Resolver({ timeout: this.options.probeTimeoutMs, tries: 1 });
    const { host, port } = this.options.listen;
    resolver.setServers([host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`]);
    const [soa, health] = await Promise.all([resolver.resolveSoa(ANSWER_ZONE), resolver.resolve4(HEALTH_NAME)]);
    if (health[0] !== '127.0.0.1') throw new Error(`health record answered ${health.join(',')}`);
    return soa.serial;
  }

  /** Makes sure knotd answers; starts (or replaces) it when it does not. Concurrent callers share one pass. */
  ensure(): Promise<void> {
    this.inFlight ??= this.ensureOnce().finally(() => (this.inFlight = null));
    return this.inFlight;
  }

  private async ensureOnce(): Promise<void> {
    try {
      this.state.serial = await this.probe();
      this.state.up = true;
      return;
    } catch (error) {
      const wasUp = this.state.up;
      this.state.up = false;
      this.state.lastFailure = (error as Error).message;
      this.state.lastFailureAt = new Date().toISOString();
      if (wasUp) this.state.restarts += 1;
      this.options.logger.warn({ err: error, wasUp }, 'answerer did not answer; (re)starting knotd');
    }
    await this.killLeftover();
    await this.start();
  }

  private async killLeftover(): Promise<void> {
    const pid = await this.pid();
    if (pid !== null && alive(pid)) {
      // Not answering but alive: frozen or wedged. SIGKILL works on a stopped process too.
      process.kill(pid, 'SIGKILL');
      const deadline = Date.now() + 2_000;
      while (alive(pid) && Date.now() < deadline) await sleep(20);
    }
    // knotd refuses to start while its pid file names a live pid, and a killed knotd whose parent
    // (an agent since gone) is not reaped stays a zombie that still "exists".
    await rm(this.paths.pid, { force: true });
  }

  private async start(): Promise<void> {
    await this.writeConf();
    // A zone file must exist for knotd to serve the zone at all: an empty one until the first publish.
    if ((await readFileIfExists(this.paths.zone)) === null) await writeFileAtomic(this.paths.zone, zoneText([], 1));
    const log = openSync(this.paths.log, 'a');
    try {
      // Its own session and no pipe to us: it outlives the agent, and a full pipe can never block it.
      const child = spawn(this.options.knotd, ['-c', this.paths.conf], { detached: true, stdio: ['ignore', log, log] });
      child.on('error', (error) => this.options.logger.error({ err: error }, 'knotd could not be started'));
      child.unref();
    } finally {
      closeSync(log);
    }
    this.state.starts += 1;
    const deadline = Date.now() + (this.options.startTimeoutMs ?? 5_000);
    let last: unknown;
    while (Date.now() < deadline) {
      try {
        this.state.serial = await this.probe();
        this.state.up = true;
        this.options.logger.info({ listen: this.options.listen, serial: this.state.serial }, 'answerer (knotd) answering');
        return;
      } catch (error) {
        last = error;
      }
      await sleep(50);
    }
    throw new ProxyError('PROXY_ANSWERER_FAILED', `knotd did not answer on ${this.caddyAddress} within its start timeout: ${(last as Error)?.message}; see ${this.paths.log}`);
  }

  /**
   * Replaces the zone with `records` under a serial above the one served, and
   * waits until knotd serves it. A zone knotd refuses leaves the last good one
   * answering and throws PROXY_ANSWERER_REJECTED.
   */
  async publish(records: readonly string[]): Promise<number> {
    const served = this.state.serial ?? (await this.probe().catch(() => 0));
    const serial = Math.max(served + 1, Math.floor(Date.now() / 1000)) >>> 0;
    await writeFileAtomic(this.paths.zone, zoneText(records, serial));
    try {
      await execFileAsync(this.options.knotc, ['-s', this.paths.socket, '-b', '-t', '5', 'zone-reload', ANSWER_ZONE], { timeout: 7_000 });
    } catch (error) {
      const out = `${(error as { stdout?: string }).stdout ?? ''}${(error as { stderr?: string }).stderr ?? ''}`.trim();
      throw new ProxyError('PROXY_ANSWERER_REJECTED', `knotd did not load the new zone (serial ${serial}): ${out || (error as Error).message}`, { cause: error });
    }
    this.state.serial = serial;
    return serial;
  }

  /** Stops knotd (tests, decommissioning). An agent stop leaves it running on purpose. */
  async destroy(): Promise<void> {
    const pid = await this.pid();
    if (pid !== null && alive(pid)) {
      process.kill(pid, 'SIGKILL');
      const deadline = Date.now() + 2_000;
      while (alive(pid) && Date.now() < deadline) await sleep(20);
    }
  }

  /**
   * The pid of the knotd running our config, or null: the pid file's, only when
   * that process's command line names our config (a stale pid file may name a
   * pid since reused by something else, which must never be killed).
   */
  async pid(): Promise<number | null> {
    const pid = Number((await readFileIfExists(this.paths.pid))?.toString('utf8').trim());
    if (!Number.isInteger(pid) || pid <= 1) return null;
    const cmdline = (await readFileIfExists(`/proc/${pid}/cmdline`))?.toString('utf8') ?? '';
    return cmdline.includes(this.paths.conf) ? pid : null;
  }

  private async writeConf(): Promise<void> {
    await mkdir(path.dirname(this.paths.zone), { recursive: true });
    await mkdir(this.paths.db, { recursive: true });
    const { host, port } = this.options.listen;
    const q = (s: string) => JSON.stringify(s);
    const conf = [
      'server:',
      `    rundir: ${q(this.options.dir)}`,
      `    pidfile: ${q(this.paths.pid)}`,
      `    listen: ${host}@${port}`,
      'control:',
      `    listen: ${q(this.paths.socket)}`,
      'database:',
      `    storage: ${q(this.paths.db)}`,
      'log:',
      '  - target: stderr',
      '    any: warning',
      'template:',
      '  - id: default',
      `    storage: ${q(path.dirname(this.paths.zone))}`,
      '    file: "%s.zone"',
      // The agent owns the file: knotd never writes it back, keeps no journal, always loads it whole.
      '    zonefile-sync: -1',
      '    zonefile-load: whole',
      '    journal-content: none',
      'zone:',
      `  - domain: ${ANSWER_ZONE}`,
      '',
    ].join('\n');
    await writeFileAtomic(this.paths.conf, conf);
  }
}

/** A process that exists and is not a zombie (a zombie holds its pid until reaped, and nothing of knotd). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as { code?: string }).code !== 'EPERM') return false;
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/** The zone file: SOA and NS with `serial`, then `records` (relative names). TTL 1: Caddy keeps its own cache. */
export function zoneText(records: readonly string[], serial: number): string {
  return [
    `$ORIGIN ${ANSWER_ZONE}.`,
    '$TTL 1',
    `@ SOA ns hostmaster ${serial} 60 60 60 1`,
    '@ NS ns',
    'ns A 127.0.0.1',
    'health A 127.0.0.1',
    ...records.filter((r) => !r.startsWith('health ')),
    '',
  ].join('\n');
}
