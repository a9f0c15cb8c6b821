import { execFile } from 'node:child_process';
import { chown, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort, repoRoot, requireSystem } from '@tether/testkit';

// Where the panel still cannot start (issue 9): one line naming the cause and
// the fix, exit code 2, no stack trace. Each cause is made for real.

const panelMain = path.join(repoRoot, 'apps', 'control-panel', 'dist', 'main.js');
const NOBODY = 65534;
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function dataDir(): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tether-fail-'));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function occupy(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return (server.address() as net.AddressInfo).port;
}

/** Runs the panel to its exit; returns its exit code and what it wrote to stderr. */
function runPanel(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [panelMain], { env: { PATH: process.env.PATH ?? '/usr/bin:/bin', TETHER_LOG_LEVEL: 'silent', ...env }, timeout: 60_000 }, (_err, _stdout, stderr) =>
      resolve({ code: child.exitCode, stderr }),
    );
  });
}

function expectOneLine(result: { code: number | null; stderr: string }, pattern: RegExp): void {
  const lines = result.stderr.trim().split('\n');
  expect(result.code, result.stderr).toBe(2);
  expect(lines, result.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(/^✖ /);
  expect(lines[0]).toMatch(pattern);
  expect(result.stderr).not.toMatch(/\n\s+at /);
}

describe('the panel refuses to start with one line and exit 2', () => {
  it('when the embedded PostgreSQL port is taken', async () => {
    const port = await occupy();
    const result = await runPanel({ TETHER_DATA_DIR: await dataDir(), TETHER_PORT: String(await freePort()), TETHER_EMBEDDED_PG_PORT: String(port) });
    expectOneLine(result, new RegExp(`port ${port} on 127\\.0\\.0\\.1 is taken.*TETHER_EMBEDDED_PG_PORT`));
  });

  it("when the panel's own port is taken", async () => {
    const port = await occupy();
    const result = await runPanel({ TETHER_DATA_DIR: await dataDir(), TETHER_PORT: String(port) });
    expectOneLine(result, new RegExp(`port 127\\.0\\.0\\.1:${port} is taken.*TETHER_PORT`));
  });
});

const root = await requireSystem('root', {
  probe: async () => process.getuid?.() === 0,
  install: async () => {},
  hint: 'owning folders as another user and mounting a small disk need root',
});

describe.skipIf(!root.available)('the panel refuses to start (as root)', () => {
  it('when the data directory belongs to someone else', async () => {
    const dir = await dataDir();
    const cluster = path.join(dir, 'postgres');
    await mkdir(cluster);
    await writeFile(path.join(cluster, 'PG_VERSION'), '18\n');
    await chown(cluster, NOBODY, NOBODY);
    const result = await runPanel({ TETHER_DATA_DIR: dir, TETHER_PORT: String(await freePort()) });
    expectOneLine(result, new RegExp(`${cluster} belongs to nobody, but PostgreSQL runs as postgres.*chown -R postgres.*TETHER_DATA_DIR`));
  });

  it('when the disk is full', async () => {
    const dir = await dataDir();
    await new Promise<void>((resolve, reject) => execFile('mount', ['-t', 'tmpfs', '-o', 'size=8m', 'tether-test-full', dir], (err) => (err ? reject(err) : resolve())));
    cleanups.push(() => new Promise<void>((resolve) => execFile('umount', [dir], () => resolve())));
    const result = await runPanel({ TETHER_DATA_DIR: dir, TETHER_PORT: String(await freePort()) });
    expectOneLine(result, /the disk holding .* is full \(\d+ MiB free\).*TETHER_DATA_DIR/);
  });
});
