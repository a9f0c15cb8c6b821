import { once } from 'node:events';
import { createConnection, createServer, type AddressInfo, type Socket } from 'node:net';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '@tether/testkit';
import { Deadline } from '../src/deadline.js';

describe('Deadline', () => {
  it('never expires before the whole timeout passed, though its timer fires 1 ms early', () => {
    const c = new ManualClock(1);
    const fired: number[] = [];
    new Deadline({ timeoutMs: 3_000, clock: c, onExpire: (e) => fired.push(e) });
    c.advance(2_999.75);
    expect(fired).toEqual([]);
    c.advance(1.25);
    expect(fired).toHaveLength(1);
    expect(fired[0]).toBeGreaterThanOrEqual(3_000);
    expect(fired[0]).toBeLessThan(3_001.5);
  });

  it('counts from the last touch, also after an early fire re-armed it for the remainder', () => {
    const c = new ManualClock(1);
    const fired: number[] = [];
    const d = new Deadline({ timeoutMs: 1_000, clock: c, onExpire: (e) => fired.push(e) });
    c.advance(999.5); // timer fired early at 999 and re-armed for the remaining millisecond
    d.touch();
    c.advance(999.5);
    expect(fired).toEqual([]);
    c.advance(1);
    expect(fired).toHaveLength(1);
    expect(fired[0]).toBeGreaterThanOrEqual(1_000);
    expect(fired[0]).toBeLessThan(1_001.5);
  });

  it('expires once, and not at all after cancel', () => {
    const c = new ManualClock(0);
    let count = 0;
    const d = new Deadline({ timeoutMs: 100, clock: c, onExpire: () => count++ });
    c.advance(500);
    d.touch();
    c.advance(500);
    expect(count).toBe(1);
    expect(d.finished).toBe(true);
    const e = new Deadline({ timeoutMs: 100, clock: c, onExpire: () => count++ });
    e.cancel();
    c.advance(500);
    expect(count).toBe(1);
    expect(c.pending).toBe(0);
  });

  it('on the system clock, fires within a few milliseconds after the timeout, never before', async () => {
    const started = performance.now();
    const elapsed = await new Promise<number>((resolve) => new Deadline({ timeoutMs: 50, onExpire: resolve }));
    const wall = performance.now() - started;
    expect(elapsed).toBeGreaterThanOrEqual(50);
    expect(wall).toBeGreaterThanOrEqual(50);
    expect(wall).toBeLessThan(500);
  });

  it('a stall of its own process past the deadline does not expire it while a frame waits unread in the socket', async () => {
    // A real socket pair: the frame is written (and delivered by the kernel) just before this process blocks for
    // longer than the deadline, so when the loop comes back the timer is due and the frame not yet read.
    const server = createServer();
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const accepted = once(server, 'connection') as Promise<[Socket]>;
    const client = createConnection((server.address() as AddressInfo).port, '127.0.0.1');
    const [peer] = await accepted;
    try {
      const expired: number[] = [];
      const deadline = new Deadline({ timeoutMs: 100, onExpire: (e) => expired.push(e) });
      let frames = 0;
      let readAt = 0;
      peer.on('data', () => {
        frames++;
        readAt = performance.now();
        deadline.touch();
      });
      await new Promise<void>((resolve) => setTimeout(resolve, 40));
      client.write('heartbeat');
      const blockedUntil = performance.now() + 250;
      while (performance.now() < blockedUntil) {
        // the process's own stall: no timer, no socket read
      }
      await new Promise<void>((resolve) => setTimeout(resolve, 30));
      expect(frames).toBe(1);
      expect(expired).toEqual([]);
      // Silent from here: it expires one whole deadline after that frame was read, not before.
      const elapsed = await new Promise<number>((resolve) => {
        const poll = setInterval(() => {
          if (expired.length > 0) {
            clearInterval(poll);
            resolve(performance.now() - readAt);
          }
        }, 2);
      });
      expect(elapsed).toBeGreaterThanOrEqual(100);
      expect(elapsed).toBeLessThan(400);
    } finally {
      client.destroy();
      peer.destroy();
      server.close();
    }
  });
});
