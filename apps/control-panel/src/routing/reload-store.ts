import type { Db } from '../db/database.js';
import type { ReloadRecorder } from './routing-reconciler.js';

/** One row per proxy reload an agent reported: when, from which hash to which, and why. */
export class PrismaReloadRecorder implements ReloadRecorder {
  constructor(private readonly prisma: Db) {}

  async reloaded(record: { nodeId: string; at: Date; hashBefore: string | null; hashAfter: string; reason: string }): Promise<void> {
    await this.prisma.reloadEvent.create({ data: record });
  }
}
