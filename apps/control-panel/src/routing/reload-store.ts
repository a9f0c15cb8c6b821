import { sanitizeText } from '@tether/common';
import type { ProxyEvents } from '@tether/protocol';
import type { Db } from '../db/database.js';
import type { SessionFactOutbox } from '../session-writes/outbox.js';
import type { ProxyEventStore, ReloadRecorder } from './routing-reconciler.js';

/**
 * One row per proxy reload an agent reported (when, from which hash to which,
 * its kind and why), and one per canary drop. Events of `proxy.events` carry
 * the agent's (boot epoch, sequence number): inserted with ON CONFLICT DO
 * NOTHING on that unique key, a resent event is stored once, and they are
 * stored before the ACK, so during an outage the agent keeps and resends them.
 * A reload reported the old way is a session fact: it goes through the ordered
 * outbox (held through an outage, its key keeps a retry from writing it twice).
 */
export class PrismaReloadRecorder implements ReloadRecorder, ProxyEventStore {
  constructor(
    private readonly prisma: Db,
    private readonly outbox: SessionFactOutbox,
  ) {}

  async reloaded(record: { nodeId: string; key?: string; at: Date; hashBefore: string | null; hashAfter: string; reason: string }): Promise<void> {
    await this.outbox.submit({
      kind: 'reload',
      nodeId: record.nodeId,
      key: record.key ?? null,
      at: record.at.toISOString(),
      hashBefore: record.hashBefore,
      hashAfter: record.hashAfter,
      reason: record.reason,
    });
  }

  /** Stores the events not stored before; returns those (so counters count each event once). */
  async store(nodeId: string, events: ProxyEvents['events']): Promise<ProxyEvents['events']> {
    // One transaction: the ACK that follows covers every event of the message. Free text is
    // sanitised like every agent text before a row (a NUL would make PostgreSQL refuse it).
    return this.prisma.$transaction(async (tx) => {
      const stored: ProxyEvents['events'] = [];
      for (const e of events) {
        const key = { nodeId, bootEpoch: BigInt(e.epoch), seq: e.seq, at: new Date(e.at) };
        const { count } =
          e.event === 'reload'
            ? await tx.reloadEvent.createMany({ data: [{ ...key, kind: e.kind, hashBefore: e.hashBefore, hashAfter: e.hashAfter, reason: sanitizeText(e.reason) }], skipDuplicates: true })
            : await tx.canaryDrop.createMany({
                data: [{ ...key, cause: e.cause, reloadReason: e.reloadReason === null ? null : sanitizeText(e.reloadReason), closeCode: e.closeCode, reconnectMs: e.reconnectMs }],
                skipDuplicates: true,
              });
        if (count > 0) stored.push(e);
      }
      return stored;
    });
  }
}
