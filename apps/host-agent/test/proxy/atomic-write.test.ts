import { createHash } from 'node:crypto';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { writeFileAtomic } from '../../src/state/atomic-file.js';
import { removeTempDirs, tempDir } from './helpers/harness.js';

// A reader on another thread reads the config file in a tight loop while the
// agent replaces it over and over with large configs. Every read must be one
// complete version; a plain writeFile (truncate, then write) fails this.

/** A large state-like file (about 1 MB), one variant per letter. */
const big = (variant: string) => Buffer.from(`${JSON.stringify(Array.from({ length: 20_000 }, (_, i) => ({ domain: `d${i}.${variant}.example.com`, upstream: `svc-s${i}:8080` })))}\n`);

const READER = `
const { readFileSync } = require('node:fs');
const { createHash } = require('node:crypto');
const { workerData, parentPort } = require('node:worker_threads');
const stop = new Int32Array(workerData.stop);
let reads = 0, torn = 0, missing = 0;
while (Atomics.load(stop, 0) === 0) {
  let bytes;
  try { bytes = readFileSync(workerData.file); } catch { missing += 1; continue; }
  reads += 1;
  if (!workerData.hashes.includes(createHash('sha256').update(bytes).digest('hex'))) torn += 1;
}
parentPort.postMessage({ reads, torn, missing });
`;

async function whileReading(file: string, contents: Buffer[], write: () => Promise<void>) {
  const stop = new SharedArrayBuffer(4);
  const hashes = contents.map((c) => createHash('sha256').update(c).digest('hex'));
  const worker = new Worker(READER, { eval: true, workerData: { file, hashes, stop } });
  const report = new Promise<{ reads: number; torn: number; missing: number }>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  try {
    await write();
  } finally {
    Atomics.store(new Int32Array(stop), 0, 1);
  }
  const result = await report;
  await worker.terminate();
  return result;
}

afterAll(removeTempDirs);

describe('atomic config writes', () => {
  const a = big('a');
  const b = big('b');

  it('a concurrent reader never sees a half-written file', async () => {
    const file = path.join(await tempDir(), 'caddy.json');
    await writeFileAtomic(file, a);
    const seen = await whileReading(file, [a, b], async () => {
      for (let i = 0; i < 60; i += 1) await writeFileAtomic(file, i % 2 ? a : b);
    });
    expect(a.length).toBeGreaterThan(1_000_000);
    expect(seen.reads).toBeGreaterThan(20);
    expect(seen).toMatchObject({ torn: 0, missing: 0 });
  });
});
