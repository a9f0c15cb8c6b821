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
