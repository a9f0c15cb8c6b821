import { describe, expect, it } from 'vitest';
import { silentLogger } from '@tether/common';
import type { DurableFact, FactResult, FactWriter } from '../src/session-writes/facts.js';
import { SessionFactOutbox } from '../src/session-writes/outbox.js';

// The outbox's two lanes, against a writer whose writes finish when the test
// says: durable facts do not wait behind a last-seen write in flight, except
// the ones that write the same node rows (they take turns, see outbox.ts).

interface Held {
  what: string;
  release(): void;
  fail(err: unknown): void;
}

/** A FactWriter whose every write stays in flight until released. Records what was written, in order of completion. */
class HeldWriter implements FactWriter {
  readonly held: Held[] = [];
  readonly done: string[] = [];
  applyError: unknown;

  apply(facts: readonly DurableFact[]): Promise<FactResult[]> {
    if (this.applyError) return Promise.reject(this.applyError);
    return this.hold(`apply ${facts.map((f) => f.kind).join(',')}`).then(() => facts.map(() => undefined));
  }

  lastSeen(times: ReadonlyMap<string, number>): Promise<void> {
    return this.hold(`lastSeen ${[...times.keys()].join(',')}`);
  }

  tokensUsed(times: ReadonlyMap<string, number>): Promise<void> {
    return this.hold(`tokensUsed ${[...times.keys()].join(',')}`);
  }

  /** The write in flight whose description starts with `what` (waits for it to start). */
  async take(what: string): Promise<Held> {
    for (let i = 0; i < 200; i++) {
      const at = this.held.findIndex((h) => h.what.startsWith(what));
      if (at >= 0) return this.held.splice(at, 1)[0]!;
      await new Promise((r) => setTimeout(r, 5));
    }
    throw new Error(`no write "${what}" started; in flight: ${this.held.map((h) => h.what).join(' | ') || 'none'}`);
  }

  get inFlight(): string[] {
    return this.held.map((h) => h.what);
  }

  private hold(what: string): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.held.push({
        what,
        release: () => {
          this.done.push(what);
          resolve();
        },
        fail: reject,
      });
    });
  }
}

const outboxOf = (writer: FactWriter) =>
  new SessionFactOutbox({ writer, logger: silentLogger, retryMinMs: 20, retryMaxMs: 40, maxPending: 10_000 });

const at = new Date().toISOString();
const delivered = (id: string): DurableFact => ({ kind: 'deployment.delivered', deploymentId: id, at });
const opened = (nodeId: string): DurableFact => ({ kind: 'session.opened', nodeId, sessionId: `${nodeId}-s`, at });

/** Whether `promise` settles within `ms`. */
const settlesWithin = (promise: Promise<unknown>, ms: number) =>
  Promise.race([promise.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);

describe('outbox lanes', () => {
  it('commits a deployment fact while a slow last-seen write is still in flight', async () => {
    const writer = new HeldWriter();
    const outbox = outboxOf(writer);
    const waits: [string, number][] = [];
    outbox.onCommitted = (kind, ms) => waits.push([kind, ms]);
    outbox.start();
    outbox.noteLastSeen('node-1', new Date());
    const lastSeen = await writer.take('lastSeen node-1');

    const committed = outbox.submit(delivered('d-1'));
    (await writer.take('apply deployment.delivered')).release();
    expect(await settlesWithin(committed, 1_000)).toBe(true);
    // The last-seen write has not finished: the fact did not wait for it.
    expect(writer.done).toEqual(['apply deployment.delivered']);
    // What tether_session_fact_commit_seconds observes.
    expect(waits).toEqual([['deployment.delivered', expect.any(Number)]]);
    expect(waits[0]![1]).toBeLessThan(1_000);

    lastSeen.release();
    await outbox.stop(1_000);
    expect(writer.done).toEqual(['apply deployment.delivered', 'lastSeen node-1']);
    expect(outbox.pending).toBe(0);
  });

  it('writes a session fact, which updates node rows too, only after the last-seen write in flight; the deployment fact ahead of it goes at once', async () => {
    const writer = new HeldWriter();
    const outbox = outboxOf(writer);
    outbox.start();
    outbox.noteLastSeen('node-1', new Date());
    const lastSeen = await writer.take('lastSeen');

    const first = outbox.submit(delivered('d-1'));
    const second = outbox.submit(opened('node-2'));
    // Only the deployment fact is written now; the open waits for its turn.
    (await writer.take('apply deployment.delivered')).release();
    await first;
    await new Promise((r) => setTimeout(r, 50));
    expect(writer.inFlight).toEqual([]);
    expect(await settlesWithin(second, 0)).toBe(false);

    lastSeen.release();
    (await writer.take('apply session.opened')).release();
    await second;
    expect(writer.done).toEqual(['apply deployment.delivered', 'lastSeen node-1', 'apply session.opened']);
    await outbox.stop(1_000);
  });

  it('a last-seen write waits for a batch of session facts in flight, and then carries the times noted meanwhile', async () => {
    const writer = new HeldWriter();
    const outbox = outboxOf(writer);
    outbox.start();
    const open = outbox.submit(opened('node-1'));
    const batch = await writer.take('apply session.opened');
    outbox.noteLastSeen('node-1', new Date());
    outbox.noteLastSeen('node-2', new Date());
    await new Promise((r) => setTimeout(r, 50));
    expect(writer.inFlight).toEqual([]);

    batch.release();
    await open;
    (await writer.take('lastSeen node-1,node-2')).release();
    await outbox.stop(1_000);
    expect(outbox.pending).toBe(0);
  });

  it('keeps writing times while the durable lane is refused; degraded until both lanes write again, and stop() flushes both', async () => {
    const writer = new HeldWriter();
    const outbox = outboxOf(writer);
    outbox.start();
    writer.applyError = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    const committed = outbox.submit(delivered('d-1'));
    await expect.poll(() => outbox.isDegraded).toBe(true);

    // The durable lane's refusals and backoff do not hold back the times.
    outbox.noteLastSeen('node-1', new Date());
    outbox.noteTokenUsed('token-1', new Date());
    (await writer.take('lastSeen node-1')).release();
    (await writer.take('tokensUsed token-1')).release();
    await expect.poll(() => outbox.pending).toBe(1);
    expect(outbox.isDegraded).toBe(true);
    expect(outbox.stats.failedAttempts).toBeGreaterThan(0);

    writer.applyError = undefined;
    outbox.noteLastSeen('node-1', new Date(Date.now() + 1_000));
    const stopping = outbox.stop(1_000);
    (await writer.take('apply deployment.delivered')).release();
    (await writer.take('lastSeen node-1')).release();
    await stopping;
    await committed;
    expect(outbox.isDegraded).toBe(false);
    expect(outbox.pending).toBe(0);
  });
});
