import { RESERVED_HOST_SUFFIX } from '@tether/protocol';
import { canonicalJson } from './canonical-json.js';

// The settings every Caddy config the agent renders is made from (the static
// config, static-render.ts; the bootstrap config the container image boots
// with), and the pieces of it that do not depend on routing.

export interface CaddyAdminSettings {
  /** Caddy's admin listen address. Kept in every config so a load never moves the admin API. */
  listen: string;
  /** Allowed Host values. Caddy 2.6 answers 403 on a unix-socket admin without them. */
  origins?: string[];
}

export type ProxyTlsMode = 'auto' | 'off';

export interface RenderOptions {
  admin: CaddyAdminSettings;
  /** Port Caddy serves plain HTTP on (inside the container in container mode). */
  httpPort: number;
  /** Port Caddy serves HTTPS on when tls is auto. */
  httpsPort: number;
  /** auto: Caddy's automatic HTTPS for every domain (certificates + HTTP→HTTPS redirect); off: plain HTTP only. */
  tls: ProxyTlsMode;
  /** Contact address for the ACME account (tls auto only). */
  acmeEmail?: string | null;
  /** The ACME CA's directory URL (tls auto, issuer acme); absent: Caddy's default (Let's Encrypt, ZeroSSL). */
  acmeCa?: string | null;
  /** PEM file of the root that signs the ACME CA's own HTTPS certificate, trusted for talking to it (a private CA). */
  acmeCaRoot?: string | null;
  /** The canary's own server (see canary/): absent when the canary is off. */
  canary?: CanaryServerSettings | null;
}

/** Caddy's ACME issuer with the operator's account address and CA (absent: Caddy's defaults). */
export function acmeIssuer(o: Pick<RenderOptions, 'acmeEmail' | 'acmeCa' | 'acmeCaRoot'>): Record<string, unknown> {
  return {
    module: 'acme',
    ...(o.acmeEmail ? { email: o.acmeEmail } : {}),
    ...(o.acmeCa ? { ca: o.acmeCa } : {}),
    ...(o.acmeCaRoot ? { trusted_roots_pem_files: [o.acmeCaRoot] } : {}),
  };
}

/** The host the canary's requests name on the canary server. */
export const CANARY_HOST = `canary.${RESERVED_HOST_SUFFIX}`;
export const CANARY_SERVER_NAME = 'tether-canary';

export interface CanaryServerSettings {
  /** Caddy's listen address for the canary server (`127.0.0.1:9080` external, `:9080` in the container). */
  listen: string;
  /** `host:port` Caddy dials to reach the agent's canary endpoint. */
  upstream: string;
}

export const SERVER_NAME = 'tether';

/**
 * Prefix of the `@id` an agent of the per-route config (before the static proxy was the only routing) put on its
 * config's catch-all route: a Caddy still running such a config is moved once (reload kind `static-move`).
 */
export const CONFIG_ID_PREFIX = 'tether-map-';

/** The config a freshly started Caddy holds: only its admin API (what the container image boots with). */
export function renderBootstrapConfig(admin: CaddyAdminSettings): string {
  return canonicalJson({ admin: admin.origins ? { listen: admin.listen, origins: admin.origins } : { listen: admin.listen } });
}
