import { execFile } from 'node:child_process';
import { chmod, chown, copyFile, mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requireSystem } from '@tether/testkit';
import { cloneCheckout, type Checkout } from './fixtures/checkout.js';

// A new operator's first run (issue 9): a checkout under a mode-0700 folder
// (as under /root) whose embedded PostgreSQL must start as root, and as an
// ordinary user from a checkout that user owns.

const execFileAsync = promisify(execFile);
const fixture = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'start-postgres.mjs');
const NOBODY = 65534;

const root = await requireSystem('root', {
  probe: async () => process.getuid?.() === 0,
  install: async () => {},
  hint: 'the first run as root can only be tried as root',
});

interface Started {
  dataDir: string;
  binDir: string;
  osUser: string;
  served: { data: string; super: string };
}

async function startIn(checkout: Checkout, dataDir: string, options: { uid?: number; cacheDir?: string } = {}): Promise<Started> {
  const entry = path.join(checkout.dir, 'packages', 'embedded-postgres', 'dist', 'index.js');
  // The starter script goes beside the checkout: this test file may itself sit under /root (mode 0700), out
  // of an ordinary user's reach, as it does when CI clones the repository there.
  const script = path.join(checkout.parent, 'start-postgres.mjs');
  await copyFile(fixture, script);
  await chmod(script, 0o644);
  const args = [script, entry, dataDir, ...(options.cacheDir ? [options.cacheDir] : [])];
  const { stdout } = await execFileAsync(process.execPath, args, {
    timeout: 90_000,
    ...(options.uid !== undefined ? { uid: options.uid, gid: NOBODY, cwd: '/', env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: '/nonexistent' } } : {}),
  });
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as Started;
}

describe.skipIf(!root.available)('first run from a checkout under a mode-0700 folder', () => {
  let checkout: Checkout;
  let cacheDir: string;

  beforeAll(async () => {
    checkout = await cloneCheckout('@tether/embedded-postgres', ['packages/embedded-postgres']);
    cacheDir = await mkdtemp(path.join(os.tmpdir(), 'tether-pg-cache-'));
  }, 240_000);

  afterAll(async () => {
    await checkout?.remove();
    if (cacheDir) await rm(cacheDir, { recursive: true, force: true });
  });

  it('as root: binaries copied to a shared cache, data moved where the postgres user can reach it', async () => {
    expect((await stat(checkout.parent)).mode & 0o777).toBe(0o700);
    const requested = path.join(checkout.dir, '.tether', 'postgres');
    const started = await startIn(checkout, requested, { cacheDir });
    expect(started.osUser).toBe('postgres');
    expect(started.binDir.startsWith(`${cacheDir}/postgres-`)).toBe(true);
    // The checkout's folder is out of the postgres user's reach: the cluster lives under /var/lib/tether/postgres.
    expect(started.dataDir).not.toBe(requested);
    expect(started.dataDir.startsWith('/var/lib/tether/postgres/')).toBe(true);
    expect(started.served.data).toBe(started.dataDir);
    // Not persistent: the folder it made is gone after stop().
    await expect(stat(started.dataDir)).rejects.toThrow(/ENOENT/);
  });

  it('as root: a data folder the postgres user can reach is used where it is', async () => {
    const base = await mkdtemp(path.join(os.tmpdir(), 'tether-pg-reach-'));
    try {
      const requested = path.join(base, 'data');
      const started = await startIn(checkout, requested, { cacheDir });
      expect(started.dataDir).toBe(requested);
    } finally {
      await rm(base, { recursive: true, force: true });
    }
  });

  it('as an ordinary user: runs from the checkout itself, as that user', async () => {
    // An ordinary user's own checkout: readable folders, a data folder it owns.
    await chmod(checkout.parent, 0o755);
    const base = await mkdtemp(path.join(os.tmpdir(), 'tether-pg-user-'));
    try {
      await chmod(base, 0o755);
      await mkdir(path.join(base, 'home'));
      await chown(path.join(base, 'home'), NOBODY, NOBODY);
      const requested = path.join(base, 'home', 'data');
      const started = await startIn(checkout, requested, { uid: NOBODY });
      expect(started.osUser).toBe('nobody');
      expect(started.dataDir).toBe(requested);
      expect(started.binDir.startsWith(checkout.dir)).toBe(true);
    } finally {
      await chmod(checkout.parent, 0o700);
      await rm(base, { recursive: true, force: true });
    }
  });
});
