import type { SessionFactOutbox } from '../session-writes/outbox.js';
import type { ReloadRecorder } from './routing-reconciler.js';

/**
 * One row per proxy reload an agent reported: when, from which hash to which,
 * and why. A reload is a session fact: it goes through the ordered outbox, so
 * an outage holds it instead of losing it, and its key keeps a retry from
 * writing it twice.
 */
export class OutboxReloadRecorder implements ReloadRecorder {
  constructor(private readonly outbox: SessionFactOutbox) {}

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
}
