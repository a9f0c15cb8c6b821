import type { ReloadKind } from '@tether/protocol';

/**
 * What the routing controller needs from a reverse proxy: read the config it
 * runs and replace it. Everything else (rendering, comparing, counting) stays
 * in the controller, so a second proxy kind only implements these.
 */
export interface ProxyConfigurator {
  /** Where it talks to, for logs and errors. */
  readonly target: string;
  /**
   * The config the proxy runs now, as the JSON text it reports ("null" when it
   * runs none). Text, not a parsed value: Caddy's own serialisation usually
   * equals the rendered bytes, and comparing strings is what keeps a no-op
   * push cheap. Throws ProxyError.
   */
  readRunning(): Promise<string>;
  /**
   * Whether the running config holds an object with this `@id`: one small
   * read whatever the config's size (Caddy's `GET /id/<id>`), which decides a
   * no-op push in constant time. Throws ProxyError.
   */
  hasObject(id: string): Promise<boolean>;
  /** Replaces the proxy's whole config; resolves once the proxy serves it. Throws ProxyError. */
  load(json: string): Promise<void>;
  close(): Promise<void>;
}

/** Keeps the proxy process itself alive (container mode); the controller then repairs its config. */
export interface ProxySupervisor {
  /** Creates or starts the proxy when it is missing or stopped, and waits until its admin API answers. */
  ensure(): Promise<void>;
  /** True once after ensure() created a new proxy: its first load is `initial`, not a repair. */
  takeCreated?(): boolean;
}

/** A load of Caddy's config the controller made, whatever asked for it (a pushed map or the periodic check). */
export interface ReloadRecord {
  kind: ReloadKind;
  reason: string;
  /** When the load was sent; Caddy closes proxied connections between this and `at`. */
  startedAt: Date;
  /** When Caddy answered the load. */
  at: Date;
  hashBefore: string | null;
  hashAfter: string;
}
