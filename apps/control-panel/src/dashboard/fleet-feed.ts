import { createLoop, type Loop } from '@tether/common';
import type { Changes, FleetRow, Snapshot } from '@tether/fleet-wire';

// The fleet page's live stream: one loop computes every row once a second
// (only while someone watches), compares each with what was last sent, and
// writes one batch of changes, serialised once, to every open stream. A row's
// last-frame time moves with every heartbeat, so it travels apart, in a
// compact `frames` map, instead of resending the row. A stream whose unsent
// bytes pass the bound is dropped (the browser reconnects and starts from a
// snapshot), never buffered without limit.

export const BATCH_INTERVAL_MS = 1_000;
/** A comment line keeps idle streams (and the proxies in between) from timing out, and finds dead clients. */
const KEEPALIVE_MS = 15_000;

export interface StreamClient {
  /** Writes a chunk; returns false when the chunk only went to the buffer. */
  write(chunk: string): void;
  /** Bytes waiting to be sent. */
  readonly buffered: number;
  /** Still allowed to watch (the cookie's claim is still valid)? */
  allowed(): boolean;
  end(reason: 'slow_client' | 'signed_out' | 'closing'): void;
}

export interface FleetFeedOptions {
  rows: () => FleetRow[];
  maxBufferedBytes: number;
  onDrop?: (reason: 'slow_client' | 'signed_out') => void;
  onCount?: (open: number) => void;
  batchMs?: number;
}

function rowKey(row: FleetRow): string {
  // Everything but the last-frame time, which moves with every heartbeat.
  const { lastFrameAt: _lastFrameAt, ...rest } = row;
  return JSON.stringify(rest);
}

export function sse(event: string, data: unknown): string {
  return `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

export class FleetFeed {
  private readonly clients = new Set<StreamClient>();
  private readonly sentKeys = new Map<string, string>();
  private readonly sentFrames = new Map<string, number | null>();
  private readonly loop: Loop;
  private lastWriteAt = 0;

  constructor(private readonly options: FleetFeedOptions) {
    this.loop = createLoop({ name: 'fleet-feed', intervalMs: options.batchMs ?? BATCH_INTERVAL_MS, run: () => this.tick() });
  }

  get size(): number {
    return this.clients.size;
  }

  /** Adds a stream: it gets the whole fleet at once, then the batches. */
  add(client: StreamClient): void {
    const rows = this.options.rows();
    if (this.clients.size === 0) this.remember(rows);
    this.clients.add(client);
    this.options.onCount?.(this.clients.size);
    // A new client's snapshot is from now; the others catch up at the next batch, which compares with what they saw.
    client.write(sse('snapshot', { now: Date.now(), rows } satisfies Snapshot));
    if (!this.loop.running) this.loop.start();
  }

  remove(client: StreamClient): void {
    if (!this.clients.delete(client)) return;
    this.options.onCount?.(this.clients.size);
    if (this.clients.size === 0) void this.loop.stop();
  }

  async stop(): Promise<void> {
    await this.loop.stop();
    for (const client of [...this.clients]) {
      this.clients.delete(client);
      client.end('closing');
    }
    this.options.onCount?.(0);
  }

  private remember(rows: FleetRow[]): void {
    this.sentKeys.clear();
    this.sentFrames.clear();
    for (const row of rows) {
      this.sentKeys.set(row.id, rowKey(row));
      this.sentFrames.set(row.id, row.lastFrameAt);
    }
  }

  /** Ends the streams no longer allowed (a token revoked, a cookie signed out) now, not at the next batch. */
  recheck(): void {
    for (const client of [...this.clients]) {
      if (!client.allowed()) this.drop(client, 'signed_out');
    }
  }

  /** One batch: the rows that changed, the last-frame times that moved, the nodes that went away. */
  tick(): void {
    this.recheck();
    if (this.clients.size === 0) return;
    const rows = this.options.rows();
    const changed: FleetRow[] = [];
    const frames: Record<string, number | null> = {};
    let moved = 0;
    const seen = new Set<string>();
    for (const row of rows) {
      seen.add(row.id);
      const key = rowKey(row);
      if (this.sentKeys.get(row.id) !== key) {
        this.sentKeys.set(row.id, key);
        this.sentFrames.set(row.id, row.lastFrameAt);
        changed.push(row);
      } else if (this.sentFrames.get(row.id) !== row.lastFrameAt) {
        this.sentFrames.set(row.id, row.lastFrameAt);
        frames[row.id] = row.lastFrameAt;
        moved++;
      }
    }
    const removed: string[] = [];
    for (const id of this.sentKeys.keys()) if (!seen.has(id)) removed.push(id);
    for (const id of removed) {
      this.sentKeys.delete(id);
      this.sentFrames.delete(id);
    }
    const now = Date.now();
    let chunk: string;
    if (changed.length > 0 || moved > 0 || removed.length > 0) chunk = sse('changes', { now, rows: changed, frames, removed } satisfies Changes);
    else if (now - this.lastWriteAt >= KEEPALIVE_MS) chunk = ': keepalive\n\n';
    else return;
    this.lastWriteAt = now;
    for (const client of [...this.clients]) {
      if (client.buffered > this.options.maxBufferedBytes) this.drop(client, 'slow_client');
      else client.write(chunk);
    }
  }

  private drop(client: StreamClient, reason: 'slow_client' | 'signed_out'): void {
    this.remove(client);
    this.options.onDrop?.(reason);
    client.end(reason);
  }
}
