import type { ProxyEvents } from '@tether/protocol';
import type { Db } from '../db/database.js';
import type { ProxyEventStore, ReloadRecorder } from './routing-reconciler.js';

/**
 * One row per proxy reload an agent reported (when, from which hash to which,
 * its kind and why), and one per canary drop. Events of `proxy.events` carry
 * the agent's (boot epoch, sequence number): inserted with ON CONFLICT DO
 * NOTHING on that unique key, a resent event is stored once.
 */
export class PrismaReloadRecorder implements ReloadRecorder, ProxyEventStore {
  constructor(private readonly prisma: Db) {}

  async reloaded(record: { nodeId: string; at: Date; hashBefore: string | null; hashAfter: string; reason: string }): Promise<void> {
    await this.prisma.reloadEvent.create({ data: record });
  }

  async store(nodeId: string, events: ProxyEvents['events']): Promise<void> {
    const reloads = [];
    const drops = [];
    for (const e of events) {
      const key = { nodeId, bootEpoch: BigInt(e.epoch), seq: e.seq, at: new Date(e.at) };
      if (e.event === 'reload') reloads.push({ ...key, kind: e.kind, hashBefore: e.hashBefore, hashAfter: e.hashAfter, reason: e.reason });
      else drops.push({ ...key, cause: e.cause, reloadReason: e.reloadReason, closeCode: e.closeCode, reconnectMs: e.reconnectMs });
    }
    // One transaction: the ACK that follows covers every event of the message.
    await this.prisma.$transaction([
      this.prisma.reloadEvent.createMany({ data: reloads, skipDuplicates: true }),
      this.prisma.canaryDrop.createMany({ data: drops, skipDuplicates: true }),
    ]);
  }
}
