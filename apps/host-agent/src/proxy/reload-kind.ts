import type { Route } from '@tether/protocol';
import { describeRouteChange } from './route-diff.js';
import type { ReloadKind } from './routing-state.js';

// Why a load is needed, decided before it happens: its kind (docs/operations.md,
// "Reload kinds") and a reason a person can read.

export interface ReloadContext {
  /** The routes in place and their hash (null before the first load). */
  appliedRoutes: readonly Route[];
  appliedHash: string | null;
  /** Render settings digest the routes in place were rendered with, and the current one. */
  appliedDigest: string | null;
  digest: string;
  /** The routes about to be loaded. */
  after: readonly Route[];
  /** What the proxy runs now, as its JSON text. */
  running: string;
  /** The supervisor just created the proxy. */
  created: boolean;
}

/** A config without an HTTP app serves nothing: what Caddy holds after a restart with its bootstrap config. */
export function servesNothing(runningText: string): boolean {
  try {
    const running = JSON.parse(runningText) as { apps?: { http?: unknown } } | null;
    return !running?.apps?.http;
  } catch {
    return false;
  }
}

export function classifyReload(c: ReloadContext): { kind: ReloadKind; reason: string } {
  const diff = describeRouteChange(c.appliedRoutes, c.after);
  // Before the first apply, or on a proxy the agent just created, an empty Caddy is expected, not something repaired.
  // The same routes rendered under other settings (or by another agent version): a change the agent made, not drift.
  const settings = c.appliedDigest !== c.digest ? 'proxy settings changed (agent configuration or version)' : null;
  const kind: ReloadKind =
    c.created || c.appliedHash === null ? 'initial' : servesNothing(c.running) ? 'repair-empty' : diff !== null || settings !== null ? 'change' : 'repair-drift';
  const repair =
    kind === 'repair-empty' ? 'repaired: proxy was running an empty config' : kind === 'repair-drift' ? 'repaired: proxy config differed from the routes in place' : null;
  const because =
    kind === 'change' && diff === null ? settings : c.created && c.appliedHash !== null && diff === null ? 'proxy created: loaded the routes in place' : null;
  // The protocol carries at most 4096 characters of reason.
  return { kind, reason: ([diff, because, repair].filter((p) => p !== null).join('; ') || 'first configuration (no routes)').slice(0, 4096) };
}
