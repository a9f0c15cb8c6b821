import path from 'node:path';
import { rm } from 'node:fs/promises';
import { errorMessage, type Logger } from '@tether/common';
import type { PanelConnection } from './connection/panel-connection.js';
import type { WorkloadController } from './controllers.js';
import { readFileIfExists, writeFileAtomic } from './state/atomic-file.js';

// A decommissioned or lost node runs nothing (issue 38). When a panel says so
// (close 4005, or a 403 whose code is AGENT_DECOMMISSIONED) the agent writes
// a marker in its state dir, then takes every Tether container out of the
// proxy's answers and stops it: no drain, their replacements already run
// elsewhere. The marker outlives restarts: an agent that starts with it
// starts nothing, before any panel is reached. It keeps dialling at the
// backoff cap (the refusal is terminal) and clears the marker only when a
// panel welcomes it again (a node registered anew with this state dir); the
// first set that panel sends is what runs from then on.

export const DECOMMISSIONED_FILE = 'decommissioned.json';

interface Marker {
  at: string;
  how: string;
}

export class DecommissionGuard {
  private readonly file: string;
  private marked: Marker | null = null;

  constructor(
    stateDir: string,
    private readonly workloads: WorkloadController,
    private readonly logger: Logger,
  ) {
    this.file = path.join(stateDir, DECOMMISSIONED_FILE);
  }

  /** Before the controllers start: a marker left by an earlier run halts the workloads at once. */
  async start(connection: PanelConnection): Promise<void> {
    connection.on('decommissioned', ({ how }) => void this.decommissioned(how));
    connection.on('ready', () => void this.welcomed());
    const stored = await readFileIfExists(this.file).catch(() => null);
    if (!stored) return;
    try {
      this.marked = JSON.parse(stored.toString('utf8')) as Marker;
    } catch {
      this.marked = { at: new Date().toISOString(), how: 'marker unreadable' };
    }
    this.logger.error(
      { since: this.marked.at, how: this.marked.how, marker: this.file },
      'this node was decommissioned (or declared lost) by an operator: no Tether container is started until a panel welcomes it again (register it anew)',
    );
    await this.workloads.halt?.();
  }

  private async decommissioned(how: string): Promise<void> {
    // Nothing starts from this moment; the marker is written before anything is stopped.
    const halting = this.workloads.halt?.();
    if (!this.marked) {
      this.marked = { at: new Date().toISOString(), how };
      this.logger.error(
        { how, marker: this.file },
        'the panel says this node is decommissioned (or declared lost): every Tether container leaves the proxy and stops, and none starts again until a panel welcomes this node anew',
      );
      await writeFileAtomic(this.file, JSON.stringify(this.marked)).catch((err: unknown) => this.logger.warn({ error: errorMessage(err) }, 'could not write the decommission marker'));
    }
    await halting?.catch((err: unknown) => this.logger.warn({ error: errorMessage(err) }, 'stopping the containers of a decommissioned node failed; retried'));
  }

  private async welcomed(): Promise<void> {
    if (!this.marked) return;
    this.marked = null;
    this.workloads.resume?.();
    this.logger.info({ marker: this.file }, 'a panel welcomed this node again: the decommission marker is cleared, its set runs from now on');
    await rm(this.file, { force: true }).catch((err: unknown) => this.logger.warn({ error: errorMessage(err) }, 'could not remove the decommission marker'));
  }
}
