import { readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres, type EmbeddedPostgresHandle } from '@tether/embedded-postgres';

// A real PostgreSQL that a test can take away and give back, as an outage
// does: stop() is `pg_ctl stop -m immediate` (SIGQUIT to the postmaster, no
// checkpoint, every connection cut), start() brings the same cluster back on
// the same port, freeze() is a hung server (SIGSTOP on the postmaster and
// every backend: sockets stay open, nothing answers) and thaw() resumes it.
// One server per test file, so no other test shares the outage.

export interface FaultablePostgres {
  /** A fresh database made at start. */
  url: string;
  port: number;
  createDatabase(): Promise<string>;
  /** Immediate shutdown; resolves once the postmaster is gone. */
  stop(): Promise<void>;
  /** Starts the same cluster again; resolves when it accepts connections. */
  start(): Promise<void>;
  /** SIGSTOP to the postmaster and all its children. */
  freeze(): void;
  /** SIGCONT to everything freeze() stopped. */
  thaw(): void;
  readonly state: 'running' | 'stopped' | 'frozen';
  /** Thaws, stops and deletes the cluster (afterAll). */
  destroy(): Promise<void>;
}

let counter = 0;

function postmasterPid(dataDir: string): number {
  const pid = Number.parseInt(readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0] ?? '', 10);
  if (!Number.isInteger(pid) || pid <= 0) throw new Error(`no postmaster pid in ${dataDir}`);
  return pid;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Direct children of `pid` (PostgreSQL backends and auxiliary processes), from /proc. */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // Field 4 (ppid) follows the command name in parentheses, which may itself contain spaces.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) children.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return children;
}

export async function startFaultablePostgres(): Promise<FaultablePostgres> {
  const base = await mkdtemp(path.join(os.tmpdir(), 'tether-pgfault-'));
  const dataDir = path.join(base, 'data');
  let handle: EmbeddedPostgresHandle | undefined = await startEmbeddedPostgres({ dataDir, persistent: true });
  const port = handle.port;
  let state: FaultablePostgres['state'] = 'running';
  let frozen: number[] = [];
  const createDatabase = async () => {
    if (!handle) throw new Error('PostgreSQL is stopped');
    return handle.createDatabase(`fault_${process.pid}_${++counter}`);
  };
  const url = await createDatabase();

  const pg: FaultablePostgres = {
    url,
    port,
    createDatabase,
    get state() {
      return state;
    },
    async stop() {
      if (state === 'frozen') pg.thaw();
      if (state === 'stopped') return;
      const pid = postmasterPid(dataDir);
      process.kill(pid, 'SIGQUIT');
      const started = Date.now();
      while (alive(pid)) {
        if (Date.now() - started > 10_000) throw new Error(`postmaster ${pid} did not exit after SIGQUIT`);
        await new Promise((r) => setTimeout(r, 20));
      }
      // The old handle's process is gone; its stop() would wait for an exit that already happened.
      handle = undefined;
      state = 'stopped';
    },
    async start() {
      if (state !== 'stopped') return;
      handle = await startEmbeddedPostgres({ dataDir, persistent: true, port });
      state = 'running';
    },
    freeze() {
      if (state !== 'running') return;
      const pid = postmasterPid(dataDir);
      // The postmaster first, so it forks no backend we would miss.
      process.kill(pid, 'SIGSTOP');
      frozen = [pid, ...childrenOf(pid)];
      for (const child of frozen.slice(1)) process.kill(child, 'SIGSTOP');
      state = 'frozen';
    },
    thaw() {
      if (state !== 'frozen') return;
      for (const pid of frozen.reverse()) {
        try {
          process.kill(pid, 'SIGCONT');
        } catch {
          // Gone already.
        }
      }
      frozen = [];
      state = 'running';
    },
    async destroy() {
      pg.thaw();
      await handle?.stop();
      handle = undefined;
      await rm(base, { recursive: true, force: true });
    },
  };
  return pg;
}
