import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freeTcpPort } from '@tether/embedded-postgres';
import { aptInstall, commandWorks, requireSystem, type Requirement } from './system.js';
import { waitFor } from './wait.js';

let caddyRequirement: Promise<Requirement> | undefined;

/** A `caddy` binary: found, or (under CI) installed from Debian's caddy package (2.6). */
export function ensureCaddy(): Promise<Requirement> {
  caddyRequirement ??= requireSystem('caddy', {
    hint: 'no caddy binary on PATH',
    probe: () => commandWorks('caddy', ['version']),
    install: () => aptInstall(['caddy']),
  });
  return caddyRequirement;
}

export interface TestCaddy {
  /** Admin API base URL, e.g. http://127.0.0.1:41234 */
  adminUrl: string;
  adminPort: number;
  /** A free port reserved for the HTTP server the test configures. */
  httpPort: number;
  /** Caddy's XDG data folder: its certificate storage is `<dataDir>/caddy`. */
  dataDir: string;
  /** Stops Caddy and starts it again with only its admin API (an empty config), like a crash and restart. */
  restartEmpty(): Promise<void>;
  stop(): Promise<void>;
  readonly process: ChildProcess;
}

/** Starts a real Caddy on free ports with only its admin API configured. */
export async function startCaddy(): Promise<TestCaddy> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tether-caddy-'));
  const adminPort = await freeTcpPort();
  const httpPort = await freeTcpPort();
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  const configPath = path.join(dir, 'bootstrap.json');
  writeFileSync(configPath, JSON.stringify({ admin: { listen: `127.0.0.1:${adminPort}` } }));

  let child: ChildProcess;
  const launch = async () => {
    child = spawn('caddy', ['run', '--config', configPath], {
      env: { ...process.env, HOME: dir, XDG_DATA_HOME: path.join(dir, 'data'), XDG_CONFIG_HOME: path.join(dir, 'config') },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
    await waitFor(
      async () => {
        if (child.exitCode !== null) throw new Error(`caddy exited with ${child.exitCode}: ${stderr}`);
        return (await fetch(`${adminUrl}/config/`)).ok;
      },
      { timeoutMs: 15_000, message: 'caddy admin API' },
    );
  };
  const halt = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  };
  await launch();
  return {
    adminUrl,
    adminPort,
    httpPort,
    dataDir: path.join(dir, 'data'),
    get process() {
      return child;
    },
    async restartEmpty() {
      await halt();
      await launch();
    },
    async stop() {
      await halt();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Caddy's own count of config loads (`caddy_admin_http_requests_total{handler="load"}` on its admin /metrics). */
export async function caddyLoadCount(adminUrl: string): Promise<number> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  let total = 0;
  for (const line of text.split('\n')) {
    if (line.startsWith('caddy_admin_http_requests_total{') && line.includes('handler="load"')) total += Number(line.split(' ').pop());
  }
  return total;
}
