import type { ReloadKind } from './routing-state.js';
import { CONFIG_ID_PREFIX } from './render.js';
import { STATIC_ID_PREFIX } from './static-render.js';

// Why a load of the static config is needed, decided before it happens: its
// kind (docs/operations.md, "Reload kinds") and a reason a person can read.

export interface ReloadContext {
  /** What the proxy runs now, as its JSON text. */
  running: string;
  /** The supervisor just created the proxy. */
  created: boolean;
  /** Hash of the routes in place (null before the first load). */
  appliedHash: string | null;
  /** Digest of the settings the config in place was rendered with, and the current one. */
  appliedDigest: string | null;
  digest: string;
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
  if (c.created || c.appliedHash === null) return { kind: 'initial', reason: 'static proxy config loaded (first configuration)' };
  if (servesNothing(c.running)) return { kind: 'repair-empty', reason: 'repaired: proxy was running an empty config; static config loaded' };
  // An agent of the per-route config ran before (docs/operations.md, "Upgrading from the per-route config").
  if (c.running.includes(CONFIG_ID_PREFIX)) {
    return { kind: 'static-move', reason: 'moved to the static proxy config: routing changes no longer reload the proxy' };
  }
  if (c.running.includes(STATIC_ID_PREFIX) && c.appliedDigest !== c.digest) {
    return { kind: 'change', reason: 'proxy settings changed (agent configuration or version)' };
  }
  return { kind: 'repair-drift', reason: 'repaired: proxy config differed from the static config' };
}
