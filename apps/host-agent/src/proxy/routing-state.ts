import type { Logger } from '@tether/common';
import { rename } from 'node:fs/promises';
import Type, { type Static } from 'typebox';
import { Compile } from 'typebox/compile';
import { DISRUPTIVE_RELOAD_KINDS, RELOAD_KIND_COUNT_KEY, ReloadKindCounts, Route, type ReloadKind, type RoutingStatus } from '@tether/protocol';
import { readFileIfExists, writeFileAtomic } from '../state/atomic-file.js';
import { ProxyError } from './errors.js';

// What the agent knows about routing across its own restarts: the routes in
// place (the base of the next reload's reason, and what to repair a restarted
// Caddy with before the panel's next push) and the reload counters the panel
// shows. Written only when one of them changes, never on a no-op apply.

const NullableString = (min = 0) => Type.Union([Type.String({ minLength: min }), Type.Null()]);

export { DISRUPTIVE_RELOAD_KINDS, RELOAD_KINDS, type ReloadKind } from '@tether/protocol';

const KindCounters = ReloadKindCounts;
type KindCounters = ReloadKindCounts;

const PersistedState = Type.Object({
  version: Type.Literal(1),
  appliedHash: NullableString(1),
  appliedRoutes: Type.Array(Route),
  reloadsTotal: Type.Integer({ minimum: 0 }),
  /** UTC day (YYYY-MM-DD) reloadsToday counts; another day means zero. */
  reloadsDay: NullableString(),
  reloadsToday: Type.Integer({ minimum: 0 }),
  lastReloadAt: NullableString(),
  lastReloadReason: NullableString(),
  /** Reloads since the state file was created, per kind (absent in files of older agents). */
  reloadKinds: Type.Optional(KindCounters),
  /** Digest of the render settings and version the routes in place were rendered with (absent: older agent). */
  renderDigest: Type.Optional(Type.String()),
});
type PersistedState = Static<typeof PersistedState>;
const validate = Compile(PersistedState);

const fresh = (): PersistedState => ({
  version: 1,
  appliedHash: null,
  appliedRoutes: [],
  reloadsTotal: 0,
  reloadsDay: null,
  reloadsToday: 0,
  lastReloadAt: null,
  lastReloadReason: null,
  reloadKinds: { initial: 0, repairEmpty: 0, change: 0, repairDrift: 0 },
});

const utcDay = (at: Date) => at.toISOString().slice(0, 10);

export class RoutingStateStore {
  private constructor(
    private readonly file: string,
    private state: PersistedState,
    private readonly now: () => Date,
  ) {}

  /** Loads the state file; an unreadable one is set aside (kept for inspection) and counting starts again. */
  static async open(file: string, options: { now: () => Date; logger: Logger }): Promise<RoutingStateStore> {
    const bytes = await readFileIfExists(file);
    if (bytes === null) return new RoutingStateStore(file, fresh(), options.now);
    let parsed: unknown;
    try {
      parsed = JSON.parse(bytes.toString('utf8'));
    } catch {
      parsed = undefined;
    }
    if (validate.Check(parsed)) return new RoutingStateStore(file, parsed, options.now);
    const aside = `${file}.unreadable-${Date.now()}`;
    await rename(file, aside);
    options.logger.error({ file, aside }, 'routing state file unreadable; set aside, reload counters start from zero');
    return new RoutingStateStore(file, fresh(), options.now);
  }

  get appliedHash(): string | null {
    return this.state.appliedHash;
  }

  get renderDigest(): string | null {
    return this.state.renderDigest ?? null;
  }

  get appliedRoutes(): readonly Route[] {
    return this.state.appliedRoutes;
  }

  status(): RoutingStatus {
    const s = this.state;
    return {
      appliedHash: s.appliedHash,
      reloadsTotal: s.reloadsTotal,
      reloadKinds: { ...(s.reloadKinds ?? fresh().reloadKinds!) },
      // The day rolls over at UTC midnight without a write: a count for another day is zero today.
      reloadsToday: s.reloadsDay === utcDay(this.now()) ? s.reloadsToday : 0,
      lastReloadAt: s.lastReloadAt,
      lastReloadReason: s.lastReloadReason,
    };
  }

  /** The proxy serves `routes` without a reload (it already did, or only the file was rewritten). */
  async markApplied(hash: string, routes: Route[], renderDigest: string): Promise<void> {
    if (this.state.appliedHash === hash && this.state.renderDigest === renderDigest) return;
    await this.save({ ...this.state, appliedHash: hash, appliedRoutes: routes, renderDigest });
  }

  /**
   * A load changed what the proxy serves. reloadsTotal counts every kind;
   * reloadsToday only the disruptive ones (DISRUPTIVE_RELOAD_KINDS).
   */
  async recordReload(hash: string, routes: Route[], reason: string, kind: ReloadKind, renderDigest: string, at = this.now()): Promise<void> {
    const today = utcDay(at);
    const s = this.state;
    const kinds: KindCounters = { ...(s.reloadKinds ?? fresh().reloadKinds!) };
    kinds[RELOAD_KIND_COUNT_KEY[kind]] = (kinds[RELOAD_KIND_COUNT_KEY[kind]] ?? 0) + 1;
    const counted = s.reloadsDay === today ? s.reloadsToday : 0;
    await this.save({
      ...s,
      appliedHash: hash,
      appliedRoutes: routes,
      reloadsTotal: s.reloadsTotal + 1,
      reloadKinds: kinds,
      renderDigest,
      reloadsDay: today,
      reloadsToday: DISRUPTIVE_RELOAD_KINDS.has(kind) ? counted + 1 : counted,
      lastReloadAt: at.toISOString(),
      lastReloadReason: reason,
    });
  }

  private async save(next: PersistedState): Promise<void> {
    // Memory first: the reload happened whether or not the disk takes the record.
    this.state = next;
    try {
      await writeFileAtomic(this.file, `${JSON.stringify(next)}\n`, 0o600);
    } catch (error) {
      throw new ProxyError('PROXY_WRITE_FAILED', `routing state ${this.file}: ${(error as Error).message}`, { cause: error });
    }
  }
}
