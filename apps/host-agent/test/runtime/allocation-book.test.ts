import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '@tether/common';
import { AllocationBook } from '../../src/runtime/allocation-book.js';

// Adoptions and failed releases survive an agent restart through allocations.json.

const dirs: string[] = [];
afterEach(async () => {
  await Promise.all(dirs.splice(0).map((d) => rm(d, { recursive: true, force: true })));
});
async function file(): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'alloc-book-'));
  dirs.push(dir);
  return path.join(dir, 'allocations.json');
}

describe('AllocationBook', () => {
  it('a restarted agent reads the same adoptions and failures back', async () => {
    const f = await file();
    const first = new AllocationBook({ file: f, logger: silentLogger });
    await first.settle(new Map([['a1', 'c1'], ['a2', 'c2']]), new Map([['a1', 'dep_07'], ['a2', 'dep_08']]));
    await first.recordFailure({ allocationId: 'a2', deploymentId: 'dep_08', code: 'HEALTHCHECK_FAILED', reason: 'GET / 500', at: 1 });
    const second = new AllocationBook({ file: f, logger: silentLogger });
    await second.load();
    expect([...second.boundView()]).toEqual([['a1', 'c1'], ['a2', 'c2']]);
    expect(second.failure('a2', 'dep_08')?.code).toBe('HEALTHCHECK_FAILED');
    expect(JSON.parse(await readFile(f, 'utf8')).version).toBe(1);
  });

  it('a failure is forgotten once the set moves its allocation to another release, or removes it', async () => {
    const book = new AllocationBook();
    await book.recordFailure({ allocationId: 'a1', deploymentId: 'dep_08', code: 'X', reason: 'r', at: 1 });
    await book.recordFailure({ allocationId: 'a2', deploymentId: 'dep_08', code: 'X', reason: 'r', at: 1 });
    await book.settle(new Map(), new Map([['a1', 'dep_08'], ['a2', 'dep_09']]));
    expect([...book.failedView()]).toEqual(['a1:dep_08']);
    await book.settle(new Map(), new Map());
    expect(book.failedView().size).toBe(0);
  });

  it('an unreadable file is ignored (labels still bind; adoption runs again)', async () => {
    const f = await file();
    await writeFile(f, '{ not json');
    const book = new AllocationBook({ file: f, logger: silentLogger });
    await book.load();
    expect(book.boundView().size).toBe(0);
  });
});
