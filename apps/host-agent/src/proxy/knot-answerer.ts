import { execFile, spawn } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { readFile, rm } from 'node:fs/promises';
import { promisify } from 'node:util';
import { sleep, type Logger } from '@tether/common';
import { readFileIfExists } from '../state/atomic-file.js';
import { KnotSupervision } from './answerer.js';
import { knotPaths, prepareKnotFiles } from './knot-files.js';
import { ANSWER_ZONE } from './static-answers.js';

// The answerer beside an operator's Caddy (TETHER_PROXY=external; the
// interface and the shared supervision are in answerer.ts): Debian's knotd
// run as its own process in its own session, so that an agent killed, frozen
// or restarted leaves it answering. The agent writes its zone file (temp +
// rename) and asks it to reload with `knotc -b`. When a probe gets no answer
// (gone, crashed, frozen), what is left is killed by its pid file and a new one started.

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

export class KnotAnswerer extends KnotSupervision {
  constructor(private readonly options: KnotAnswererOptions) {
    super(knotPaths(options.dir), options);
  }

  get caddyAddress(): string {
    const { host, port } = this.options.listen;
    return `udp/${host.includes(':') ? `[${host}]` : host}:${port}`;
  }

  protected probeTarget(): Promise<{ host: string; port: number }> {
    return Promise.resolve(this.options.listen);
  }

  protected async replace(): Promise<void> {
    await this.killLeftover();
    await prepareKnotFiles(this.paths, this.options.listen);
    const log = openSync(this.paths.log, 'a');
    let exited = false;
    try {
      // Its own session and no pipe to us: it outlives the agent, and a full pipe can never block it.
      const child = spawn(this.options.knotd, ['-c', this.paths.conf], { detached: true, stdio: ['ignore', log, log] });
      child.on('error', (error) => this.options.logger.error({ err: error }, 'knotd could not be started'));
      child.on('exit', () => (exited = true));
      child.unref();
    } finally {
      closeSync(log);
    }
    await this.waitAnswering(this.caddyAddress, () => exited);
  }

  protected async reload(): Promise<void> {
    await execFileAsync(this.options.knotc, ['-s', this.paths.socket, '-b', '-t', '5', 'zone-reload', ANSWER_ZONE], { timeout: 7_000 });
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
    return (await cmdlineOf(pid)).includes(this.paths.conf) ? pid : null;
  }
}

/** A process's command line; empty once it is gone (ENOENT), or while it exits (the read fails with ESRCH). */
async function cmdlineOf(pid: number): Promise<string> {
  try {
    return (await readFile(`/proc/${pid}/cmdline`)).toString('utf8');
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === 'ENOENT' || code === 'ESRCH') return '';
    throw error;
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
