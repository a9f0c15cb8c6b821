import { PassThrough, type Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { silentLogger } from '@tether/common';
import { decode, LOG_LIMITS, type LogsChunk, type LogsEnd } from '@tether/protocol';
import type { LogSource, ServiceContainer } from '../../src/logs/docker-logs.js';
import { LogStreams, type LogChannel } from '../../src/logs/log-streams.js';

// The agent's log sender against a scripted log source (Docker's side is
// covered end to end in apps/control-panel/test/e2e-logs*.test.ts): credit is
// never exceeded, chunks stay under their bound, at most one chunk is being
// written at a time, and a stream whose reader stops pauses its source.

/** A stdout frame; timed an hour ahead, so a follow (which starts at "now") takes it. */
const frame = (text: string) => {
  const body = Buffer.from(`${new Date(Date.now() + 3_600_000).toISOString()} ${text}\n`);
  const header = Buffer.alloc(8);
  header[0] = 1;
  header.writeUInt32BE(body.length, 4);
  return Buffer.concat([header, body]);
};

class ScriptedSource implements LogSource {
  readonly follow = new PassThrough();
  readonly history: Buffer[] = [];
  async containers(): Promise<ServiceContainer[]> {
    return [{ id: 'c'.repeat(64), name: 'tether-web-dep-0', createdAt: 1 }];
  }
  async open(_id: string, options: { follow: boolean }): Promise<Readable> {
    if (options.follow) return this.follow;
    const history = new PassThrough();
    history.end(Buffer.concat(this.history));
    return history;
  }
  async watchStarts(): Promise<void> {}
}

/** A channel whose writes complete only when the test says so. */
function slowChannel() {
  const frames: string[] = [];
  const pending: (() => void)[] = [];
  let n = 0;
  const channel: LogChannel = {
    send(text, onWritten) {
      frames.push(text);
      pending.push(() => onWritten());
      return true;
    },
    nextId: () => `a-${++n}`,
  };
  return { channel, frames, pending, flush: () => pending.splice(0).forEach((f) => f()) };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('LogStreams', () => {
  it('sends one chunk at a time, each within the credit and 64 KiB, then the end', async () => {
    const source = new ScriptedSource();
    for (let i = 0; i < 3_000; i += 1) source.history.push(frame(`line ${i} ${'x'.repeat(80)}`));
    const streams = new LogStreams({ source, logger: silentLogger });
    const { channel, frames, pending, flush } = slowChannel();
    streams.attach(channel);
    const credit = 150_000;
    streams.open({ type: 'logs.open', id: 'p-1', streamId: 's1', serviceId: 'svc', tail: null, since: null, follow: false, credit });
    let granted = credit;
    for (let round = 0; round < 500 && !frames.some((f) => f.includes('"logs.end"')); round += 1) {
      await tick();
      // Never a second frame while the first is still being written.
      expect(pending.length).toBeLessThanOrEqual(1);
      flush();
      const bytes = frames.reduce((total, f) => total + (f.includes('"logs.chunk"') ? Buffer.byteLength(f) : 0), 0);
      expect(bytes).toBeLessThanOrEqual(granted);
      // More credit, 100 KB at a time, once the stream used most of what it had.
      if (bytes > granted - LOG_LIMITS.maxChunkBytes) {
        granted += 100_000;
        streams.credit({ type: 'logs.credit', id: `p-c${round}`, streamId: 's1', bytes: 100_000 });
      }
    }
    const decoded = frames.map((f) => decode(f));
    for (const d of decoded) expect(d.ok).toBe(true);
    const chunks = decoded.map((d) => (d as { message: LogsChunk | LogsEnd }).message);
    for (const f of frames) expect(Buffer.byteLength(f)).toBeLessThanOrEqual(LOG_LIMITS.maxChunkBytes);
    const lines = chunks.flatMap((c) => (c.type === 'logs.chunk' ? c.lines.map((l) => l.text) : []));
    expect(lines).toHaveLength(3_000);
    expect(lines[0]).toMatch(/^line 0 /);
    expect(lines.at(-1)).toMatch(/^line 2999 /);
    expect(chunks.at(-1)).toMatchObject({ type: 'logs.end', code: 'END_OF_LOGS' });
    expect(streams.size).toBe(0);
  });

  it('without credit a following stream queues up to its high-water mark and pauses its source', async () => {
    const source = new ScriptedSource();
    const streams = new LogStreams({ source, logger: silentLogger, limits: { highWaterBytes: 64 * 1024, backlogBytes: 1024 * 1024 } });
    const { channel, frames, flush } = slowChannel();
    streams.attach(channel);
    streams.open({ type: 'logs.open', id: 'p-1', streamId: 's1', serviceId: 'svc', tail: 0, since: null, follow: true, credit: 70_000 });
    await tick();
    await tick();
    for (let i = 0; i < 5_000 && !source.follow.isPaused(); i += 1) {
      source.follow.write(frame(`line ${i} ${'y'.repeat(100)}`));
      if (i % 50 === 0) {
        await tick();
        flush();
      }
    }
    await tick();
    flush();
    expect(source.follow.isPaused()).toBe(true);
    const sentBytes = frames.reduce((n, f) => n + Buffer.byteLength(f), 0);
    expect(sentBytes).toBeLessThanOrEqual(70_000);
    expect(streams.bufferedBytes).toBeGreaterThan(64 * 1024);
    expect(streams.bufferedBytes).toBeLessThan(64 * 1024 + 8 * 1024);
    // Credit drains the queue and resumes the source.
    streams.credit({ type: 'logs.credit', id: 'p-2', streamId: 's1', bytes: 1_000_000 });
    for (let i = 0; i < 20; i += 1) {
      await tick();
      flush();
    }
    expect(source.follow.isPaused()).toBe(false);
    streams.close({ type: 'logs.close', id: 'p-3', streamId: 's1' });
    expect(streams.size).toBe(0);
  });
});
