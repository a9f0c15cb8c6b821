import { chmodSync, linkSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '@tether/common';
import { measureFolder, PendingRemovals } from '../../src/volumes/index.js';

// The two pieces of the agent's volume bookkeeping that need no Docker: the bounded size walk and the
// removals file that survives a restart (the real-Docker paths: apps/control-panel/test/e2e-volumes.test.ts).

const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tether-vol-'));
  dirs.push(dir);
  return dir;
};
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('measureFolder', () => {
  it('counts allocated blocks of files and folders, a hard-linked file once, and never follows a symbolic link', async () => {
    const root = tempDir();
    const outside = tempDir();
    writeFileSync(path.join(outside, 'big'), Buffer.alloc(1024 * 1024, 1));
    mkdirSync(path.join(root, 'a/b'), { recursive: true });
    writeFileSync(path.join(root, 'a/b/f'), Buffer.alloc(100_000, 1));
    linkSync(path.join(root, 'a/b/f'), path.join(root, 'a/link'));
    symlinkSync(outside, path.join(root, 'out'));
    const { sizeBytes } = await measureFolder(root);
    // 100,000 bytes take 25 blocks of 4 KiB; three folders one block each; the symlink a block at most.
    expect(sizeBytes).not.toBeNull();
    expect(sizeBytes!).toBeGreaterThanOrEqual(100_000);
    expect(sizeBytes!).toBeLessThan(100_000 + 8 * 4096);
  });

  it('past its entry or time budget it says so instead of a partial sum', async () => {
    const root = tempDir();
    for (let i = 0; i < 50; i++) writeFileSync(path.join(root, `f${i}`), 'x');
    expect(await measureFolder(root, { timeMs: 10_000, entries: 50 })).toMatchObject({ sizeBytes: expect.any(Number) });
    expect(await measureFolder(root, { timeMs: 10_000, entries: 49 })).toEqual({ sizeBytes: null, reason: 'over-budget' });
    let t = 0;
    // A clock that moves 1 ms per look: 50 entries take 50 ms.
    expect(await measureFolder(root, { timeMs: 60, entries: 1_000 }, () => t++)).toMatchObject({ sizeBytes: expect.any(Number) });
    t = 0;
    expect(await measureFolder(root, { timeMs: 40, entries: 1_000 }, () => t++)).toEqual({ sizeBytes: null, reason: 'over-budget' });
  });

  it('a missing folder or a file is unreadable, not zero', async () => {
    const root = tempDir();
    writeFileSync(path.join(root, 'file'), 'x');
    expect(await measureFolder(path.join(root, 'missing'))).toEqual({ sizeBytes: null, reason: 'unreadable' });
    expect(await measureFolder(path.join(root, 'file'))).toEqual({ sizeBytes: null, reason: 'unreadable' });
  });
});

describe('PendingRemovals', () => {
  it('a removal is on disk when add() resolves, a second run loads it, done() takes it off', async () => {
    const file = path.join(tempDir(), 'state', 'volume-removals.json');
    const first = new PendingRemovals({ file, logger: silentLogger });
    await first.add({ serviceId: 'svc_1', names: null });
    await first.add({ serviceId: 'svc_2', names: ['data', 'cache'] });
    await first.add({ serviceId: 'svc_2', names: ['cache', 'data'] }); // the same removal
    expect(JSON.parse(readFileSync(file, 'utf8')).removals).toHaveLength(2);

    const second = new PendingRemovals({ file, logger: silentLogger });
    expect(await second.load()).toEqual([
      { serviceId: 'svc_1', names: null },
      { serviceId: 'svc_2', names: ['cache', 'data'] },
    ]);
    await second.done({ serviceId: 'svc_1', names: null });
    expect(await new PendingRemovals({ file, logger: silentLogger }).load()).toEqual([{ serviceId: 'svc_2', names: ['cache', 'data'] }]);
  });

  it('an unreadable or malformed file resumes nothing and does not stop the agent', async () => {
    const dir = tempDir();
    const file = path.join(dir, 'volume-removals.json');
    writeFileSync(file, '{not json');
    expect(await new PendingRemovals({ file, logger: silentLogger }).load()).toEqual([]);
    writeFileSync(file, JSON.stringify({ version: 1, removals: [{ serviceId: 7 }, { serviceId: 'ok', names: 'x' }, { serviceId: 'svc', names: null }] }));
    expect(await new PendingRemovals({ file, logger: silentLogger }).load()).toEqual([{ serviceId: 'svc', names: null }]);
    if (process.getuid?.() !== 0) {
      chmodSync(file, 0);
      expect(await new PendingRemovals({ file, logger: silentLogger }).load()).toEqual([]);
    }
  });
});
