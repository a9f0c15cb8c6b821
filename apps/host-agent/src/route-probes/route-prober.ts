import { createLoop, errorMessage, type Logger, type Loop } from '@tether/common';
import type { Route, RouteCertificate, RouteProbe } from '@tether/protocol';
import { dnsVerdict, type DnsVerdict } from './dns-check.js';
import { describeIssuanceError, type IssuanceError } from './issuance-log.js';
import { probeRoute, type ProbedRoute, type ProbeTarget } from './route-probe.js';

// Probes every route of the applied map through the agent's own proxy: a route
// new to the map right away (in map order), then each one interval after its
// last probe, so a steady map's probes stay spread over the interval as they
// were first made. One probe at a time, at most `ratePerSecond`: a host with
// more routes than interval × rate probes each less often (documented).

export interface RouteProberOptions {
  intervalMs: number;
  timeoutMs: number;
  ratePerSecond: number;
  /** Where the proxy is now; null while it cannot be reached (no probe is made then). */
  target: () => Promise<ProbeTarget | null>;
  logger: Logger;
  now?: () => Date;
  /** Tells the session a probe changed a route's state (so it need not wait for the next heartbeat). */
  onStateChange?: () => void;
  /** TLS under the ACME issuer: whether a name's DNS points here; a TLS probe is made only when it does (dns-check.ts). */
  dnsCheck?: (domain: string) => Promise<DnsVerdict>;
  /** The domain's last issuance error from Caddy's log (issuance-log.ts): the certificate's `lastError` in the CA's words. */
  issuanceError?: (domain: string) => IssuanceError | null;
}

interface Entry {
  route: ProbedRoute;
  dueAt: number;
  last: RouteProbe | null;
}

const keyOf = (r: ProbedRoute) => `${r.domain}\u0000${r.pathPrefix ?? ''}`;

export class RouteProber {
  private entries = new Map<string, Entry>();
  /** The last certificate seen per domain: a handshake that fails later keeps it, with its error. */
  private readonly certificates = new Map<string, RouteCertificate>();
  private readonly loop: Loop;
  private readonly now: () => Date;

  constructor(private readonly options: RouteProberOptions) {
    this.now = options.now ?? (() => new Date());
    this.loop = createLoop({
      name: 'route-probes',
      intervalMs: Math.max(1, Math.round(1000 / options.ratePerSecond)),
      run: () => this.probeNext(),
      onError: (error) => options.logger.warn({ err: error }, 'route probe failed to run; retrying'),
    });
  }

  get intervalMs(): number {
    return this.options.intervalMs;
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** The routes of the map now in place: new ones are probed first, gone ones forgotten. */
  setRoutes(routes: readonly Pick<Route, 'domain' | 'pathPrefix'>[]): void {
    const next = new Map<string, Entry>();
    const now = this.now().getTime();
    for (const route of routes) {
      const key = keyOf(route);
      if (next.has(key)) continue;
      next.set(key, this.entries.get(key) ?? { route: { domain: route.domain, pathPrefix: route.pathPrefix }, dueAt: now, last: null });
    }
    this.entries = next;
    const domains = new Set(routes.map((r) => r.domain));
    for (const domain of this.certificates.keys()) if (!domains.has(domain)) this.certificates.delete(domain);
  }

  /** The last probe of each route in the map (routes not probed yet are left out), with the latest issuance error. */
  results(): RouteProbe[] {
    const out: RouteProbe[] = [];
    for (const entry of this.entries.values()) if (entry.last) out.push(this.withIssuanceError(entry.last));
    return out;
  }

  private withIssuanceError(probe: RouteProbe): RouteProbe {
    if (!probe.certificate || probe.notProbed) return probe;
    const error = this.options.issuanceError?.(probe.domain);
    return error ? { ...probe, certificate: { ...probe.certificate, lastError: describeIssuanceError(error) } } : probe;
  }

  /** Whether to make a TLS probe of this name: asked only under the ACME issuer; a failed check is a `dns-error`. */
  private async dnsVerdict(domain: string): Promise<DnsVerdict> {
    if (!this.options.dnsCheck) return { probe: true };
    try {
      return await this.options.dnsCheck(domain);
    } catch (error) {
      return dnsVerdict(domain, { addresses: [], error: errorMessage(error) }, []);
    }
  }

  /** Probes the route that is due first, if any is due. */
  async probeNext(): Promise<void> {
    const now = this.now().getTime();
    let due: Entry | null = null;
    for (const entry of this.entries.values()) if (entry.dueAt <= now && (due === null || entry.dueAt < due.dueAt)) due = entry;
    if (due === null) return;
    const target = await this.options.target();
    if (target === null) {
      due.dueAt = now + this.options.intervalMs;
      return;
    }
    const started = performance.now();
    const verdict = target.tls ? await this.dnsVerdict(due.route.domain) : ({ probe: true } as const);
    const probe = verdict.probe
      ? await probeRoute(target, due.route, this.options.timeoutMs, this.now)
      : notProbed(due.route, verdict, Math.round(performance.now() - started), this.now());
    // The map may have changed meanwhile: a route that left it keeps no result.
    const current = this.entries.get(keyOf(due.route));
    if (current !== due) return;
    const changed = due.last?.state !== probe.state;
    if (probe.certificate) probe.certificate = this.noteCertificate(probe.domain, probe.certificate);
    due.last = probe;
    due.dueAt = this.now().getTime() + this.options.intervalMs;
    if (changed) this.options.onStateChange?.();
  }

  private noteCertificate(domain: string, seen: RouteCertificate): RouteCertificate {
    const before = this.certificates.get(domain);
    const merged = seen.serial === null && before ? { ...before, lastError: seen.lastError } : seen;
    this.certificates.set(domain, merged);
    return merged;
  }
}

/** A route not probed because its DNS does not point here: no handshake, and the status says why. */
function notProbed(route: ProbedRoute, verdict: Extract<DnsVerdict, { probe: false }>, latencyMs: number, at: Date): RouteProbe {
  return {
    domain: route.domain,
    pathPrefix: route.pathPrefix,
    at: at.toISOString(),
    state: 'failing',
    madeBy: 'none',
    status: null,
    error: verdict.text,
    latencyMs,
    certificate: { issuer: null, notBefore: null, notAfter: null, serial: null, lastError: verdict.text },
    notProbed: verdict.notProbed,
  };
}
