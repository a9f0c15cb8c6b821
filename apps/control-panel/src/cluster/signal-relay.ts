import { listen, type Logger } from '@tether/common';
import { CLOSE_CODES } from '@tether/protocol';
import type { Db } from '../db/database.js';
import type { PanelEvents } from '../panel-events.js';
import type { SessionGenerations } from '../sessions/generations.js';
import type { SessionRegistry } from '../sessions/registry.js';
import type { DeploySignals } from './cluster-dispatcher.js';
import type { PanelSignals, Signal } from './panel-signals.js';

// The signals between panels (LISTEN/NOTIFY, ids only; panel-signals.ts), both
// ways: what this panel's REST changes mean for nodes whose sessions other
// panels hold goes out; what other panels signal is turned into this panel's
// events, or closes a session a newer claim superseded. After LISTEN
// reconnects, what was signalled meanwhile is read again (rescan).

export interface SignalRelayOptions {
  panelId: string;
  prisma: Db;
  registry: SessionRegistry;
  events: PanelEvents;
  generations: SessionGenerations;
  signals: PanelSignals;
  deploys: DeploySignals;
  logger: Logger;
}

export class SignalRelay {
  constructor(private readonly options: SignalRelayOptions) {}

  private get panelId(): string {
    return this.options.panelId;
  }

  /** Adds the listeners; returns what removes them. */
  start(): () => void {
    const { registry, events } = this.options;
    const send = (kind: Parameters<PanelSignals['send']>[0], ids: string[]) => void this.options.signals.send(kind, this.panelId, ids);
    // Each listener's arguments are spelled out: listen() does not infer them from these emitters' event maps.
    const off = [
      listen(this.options.signals, 'signal', (signal: Signal) => this.received(signal)),
      listen(this.options.signals, 'connected', () => void this.rescan()),
      // REST changes committed here reach the owner wherever it is (a signal to self is ignored on receipt).
      listen(events, 'routing.changed', (e: { nodeIds: string[]; remote?: boolean }) => {
        const ids = e.nodeIds.filter((id) => !registry.get(id));
        if (!e.remote && ids.length > 0) send('routing', ids);
      }),
      listen(events, 'workloads.changed', (e: { nodeId: string; remote?: boolean }) => {
        if (!e.remote && !registry.get(e.nodeId)) send('workloads', [e.nodeId]);
      }),
      listen(events, 'node.decommissioned', (e: { nodeId: string; remote?: boolean }) => {
        if (!e.remote) send('decommissioned', [e.nodeId]);
      }),
      listen(events, 'token.revoked', (e: { tokenId: string; remote?: boolean }) => {
        if (!e.remote) send('revoked', [e.tokenId]);
      }),
      listen(events, 'cookie.signed-out', (e: { cookieId: string; expiresAtMs: number; remote?: boolean }) => {
        if (!e.remote) send('signed-out', [`${e.cookieId}/${e.expiresAtMs}`]);
      }),
    ];
    return () => off.splice(0).forEach((f) => f());
  }

  private received(signal: Signal): void {
    const { registry, events } = this.options;
    switch (signal.kind) {
      case 'owner':
        // Its own claims never close a session here: the registry replaces an older session of a node itself,
        // and a claim made again for a live session (timeline-fence.ts) must not close that session.
        if (signal.panel === this.panelId) break;
        for (const entry of signal.ids) {
          const [nodeId, gen] = entry.split('/');
          const generation = Number(gen);
          if (nodeId && Number.isFinite(generation)) this.supersedeIfOlder(nodeId, generation, signal.panel);
        }
        break;
      case 'deploy':
        if (signal.panel === this.panelId) for (const id of signal.ids) this.options.deploys.requested(id);
        break;
      case 'deployed':
        for (const entry of signal.ids) {
          const [id, outcome] = entry.split('/');
          if (id) this.options.deploys.answered(id, outcome);
        }
        break;
      case 'routing': {
        if (signal.panel === this.panelId) break;
        const nodeIds = signal.ids.filter((id) => registry.get(id));
        if (nodeIds.length > 0) events.emit('routing.changed', { nodeIds, reason: `changed on panel ${signal.panel}`, remote: true });
        break;
      }
      case 'revoked':
        if (signal.panel === this.panelId) break;
        for (const tokenId of signal.ids) events.emit('token.revoked', { tokenId, remote: true });
        break;
      case 'decommissioned':
        // Every panel forgets the node's token; the one holding its session closes it with 4005.
        if (signal.panel === this.panelId) break;
        for (const nodeId of signal.ids) events.emit('node.decommissioned', { nodeId, remote: true });
        break;
      case 'signed-out':
        if (signal.panel === this.panelId) break;
        for (const entry of signal.ids) {
          const [cookieId, at] = entry.split('/');
          if (cookieId && Number.isFinite(Number(at))) events.emit('cookie.signed-out', { cookieId, expiresAtMs: Number(at), remote: true });
        }
        break;
      case 'workloads':
        if (signal.panel === this.panelId) break;
        for (const nodeId of signal.ids) if (registry.get(nodeId)) events.emit('workloads.changed', { nodeId, reason: `changed on panel ${signal.panel}`, remote: true });
        break;
      default:
        break;
    }
  }

  private supersedeIfOlder(nodeId: string, generation: number, panel: string): void {
    const session = this.options.registry.get(nodeId);
    if (!session) return;
    const mine = this.options.generations.get(session.id);
    if (mine !== undefined && mine < generation) {
      session.teardown(CLOSE_CODES.SUPERSEDED, `superseded by a newer session of the node on panel ${panel} (generation ${generation})`);
    }
  }

  /** After LISTEN (re)connects: signals sent meanwhile are lost, so ownership and pending work are read again. */
  private async rescan(): Promise<void> {
    const sessions = this.options.registry.list();
    try {
      if (sessions.length > 0) {
        const rows = await this.options.prisma.$queryRaw<{ node_id: string; generation: bigint; panel_id: string }[]>`
          SELECT node_id, generation, panel_id FROM node_owners WHERE node_id = ANY(${sessions.map((s) => s.nodeId)}::text[])`;
        for (const r of rows) this.supersedeIfOlder(r.node_id, Number(r.generation), r.panel_id);
        // Routing changes signalled while LISTEN was down: the owner pushes the full map (the agent ignores an identical one).
        const owned = this.options.registry.list().map((s) => s.nodeId);
        if (owned.length > 0) this.options.events.emit('routing.changed', { nodeIds: owned, reason: 'rescan after LISTEN reconnected', remote: true });
      }
      void this.options.deploys.rescan().catch((err: unknown) => this.options.logger.warn({ err }, 'deployment rescan failed'));
    } catch (err) {
      this.options.logger.warn({ err }, 'rescan after LISTEN reconnect failed');
    }
  }
}
