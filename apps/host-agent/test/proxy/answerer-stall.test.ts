import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureKnot, freePort } from '@tether/testkit';
import { KnotAnswerer } from '../../src/proxy/index.js';
import { removeTempDirs, silentLogger, tempDir } from './helpers/harness.js';

// An agent that stalls (frozen, then thawed) while a probe of a healthy knotd
// is in flight: on thaw its timers run before it reads the answer waiting in
// its socket, so that probe "times out". The answerer must not be killed and
// replaced for the agent's own pause (it was, and the static-survival test
// then met an answerer in the middle of a needless replacement).

const ready = (await ensureKnot()).available;
const PROBE_MS = 300;

/** Blocks this thread like a SIGSTOP would: no timer, no socket read, for `ms`. */
function stall(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

describe.skipIf(!ready)('answerer supervision across a stall of the agent', () => {
  let answerer: KnotAnswerer;

  beforeAll(async () => {
    const dir = path.join(await tempDir(), 'answerer');
    answerer = new KnotAnswerer({ dir, listen: { host: '127.0.0.1', port: await freePort() }, knotd: 'knotd', knotc: 'knotc', probeTimeoutMs: PROBE_MS, logger: silentLogger });
    await answerer.ensure();
  });

  afterAll(async () => {
    await answerer?.destroy();
    await removeTempDirs();
  });

  it('a probe in flight across a 1.5 s stall leaves the healthy answerer running: no restart, same pid', async () => {
    const pid = await answerer.pid();
    expect(pid).not.toBeNull();
    expect(answerer.status()).toMatchObject({ up: true, starts: 1, restarts: 0 });
    const ensured = answerer.ensure();
    // Let the probe's query go out (a few microtask turns), then stall past its timeout.
    for (let i = 0; i < 10; i += 1) await Promise.resolve();
    stall(5 * PROBE_MS);
    await ensured;
    expect(answerer.status()).toMatchObject({ up: true, starts: 1, restarts: 0 });
    expect(await answerer.pid()).toBe(pid);
  });

  it('a knotd killed is still replaced at the next check (the stall rule does not hide a real failure)', async () => {
    const pid = await answerer.pid();
    process.kill(pid!, 'SIGKILL');
    const started = performance.now();
    await answerer.ensure();
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(answerer.status()).toMatchObject({ up: true, starts: 2, restarts: 1 });
    expect(await answerer.pid()).not.toBe(pid);
  });
});
