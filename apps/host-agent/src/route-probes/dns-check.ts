import { Resolver } from 'node:dns/promises';
import { isIP } from 'node:net';
import os from 'node:os';
import { errorMessage, truncate } from '@tether/common';
import { FIELD_LIMITS, type RouteNotProbed } from '@tether/protocol';

// Before a TLS probe of a name under the ACME issuer: does its DNS point at
// this host? A probe's SNI makes Caddy start an on-demand ACME attempt, and a
// validation that fails (the CA reaching some other host) counts against the
// CA's limits, so a name whose A/AAAA records name none of this host's
// addresses is not probed at all: no handshake, no certificate requested, and
// the route's status says why (docs/api.md, "Routes"). The decision is pure
// (dnsVerdict); DnsCheck adds the lookups and a short cache.

export type DnsVerdict = { probe: true } | { probe: false; notProbed: RouteNotProbed; text: string };

export interface DnsAnswer {
  /** A and AAAA addresses found (either family may have failed). */
  addresses: string[];
  /** Why a lookup failed (not "no such name" or "no records": those are an empty answer); null when none did. */
  error: string | null;
}

/** One spelling per address, so `2001:DB8::1` and `2001:db8:0::1` compare equal. */
export function normalizeAddress(address: string): string {
  if (isIP(address) !== 6) return address;
  try {
    return new URL(`http://[${address}]/`).hostname.slice(1, -1);
  } catch {
    return address.toLowerCase();
  }
}

const list = (addresses: readonly string[]) => (addresses.length === 0 ? 'none' : addresses.join(', '));

/** Probe when one of the name's addresses is this host's; otherwise say why not (the text goes into the status). */
export function dnsVerdict(domain: string, answer: DnsAnswer, hostAddresses: readonly string[]): DnsVerdict {
  const ours = new Set(hostAddresses.map(normalizeAddress));
  const resolved = [...new Set(answer.addresses.map(normalizeAddress))].sort().slice(0, 64);
  if (resolved.some((a) => ours.has(a))) return { probe: true };
  const host = [...ours].sort().slice(0, 64);
  // An address found elsewhere is an answer even when the other family's lookup failed; nothing found and a failure is not.
  const failed = answer.error !== null && resolved.length === 0;
  const notProbed: RouteNotProbed = { reason: failed ? 'dns-error' : 'dns-elsewhere', resolved, hostAddresses: host };
  const why = failed
    ? `the DNS lookup of ${domain} failed (${answer.error})`
    : resolved.length === 0
      ? `${domain} has no A or AAAA record`
      : `${domain} resolves to ${list(resolved)}${answer.error === null ? '' : ` (a lookup failed: ${answer.error})`}`;
  const text = `not probed, no certificate requested: ${why}, not to this host (${list(host)})`;
  return { probe: false, notProbed, text: truncate(text, FIELD_LIMITS.text) };
}

/** The addresses a host is reached at by default: its interfaces' addresses, without loopback and link-local ones. */
export function interfaceAddresses(interfaces: ReturnType<typeof os.networkInterfaces> = os.networkInterfaces()): string[] {
  const out: string[] = [];
  for (const entries of Object.values(interfaces)) {
    for (const e of entries ?? []) {
      if (e.internal || (e.family === 'IPv6' && /^fe[89ab]/i.test(e.address))) continue;
      out.push(e.address);
    }
  }
  return out;
}

/** "No such name" and "no records of this type" are answers (empty), not failures. */
const EMPTY_CODES = new Set(['ENOTFOUND', 'ENODATA', 'ENONAME']);

export interface DnsCheckOptions {
  /** The DNS server (`ip`, `ip:port`, `[v6]:port`); null: the system's. */
  server: string | null;
  /** How long an answer is reused. */
  cacheMs: number;
  /** Bound on one lookup. */
  timeoutMs: number;
  /** This host's addresses; null: interfaceAddresses() at each check. */
  publicAddresses: readonly string[] | null;
  /** For tests: the A/AAAA lookup. */
  lookup?: (domain: string) => Promise<DnsAnswer>;
  now?: () => number;
}

export class DnsCheck {
  private readonly cache = new Map<string, { at: number; answer: Promise<DnsAnswer> }>();
  private readonly lookup: (domain: string) => Promise<DnsAnswer>;
  private readonly now: () => number;

  constructor(private readonly options: DnsCheckOptions) {
    this.now = options.now ?? Date.now;
    this.lookup = options.lookup ?? this.resolverLookup();
  }

  async check(domain: string): Promise<DnsVerdict> {
    const now = this.now();
    let entry = this.cache.get(domain);
    if (!entry || now - entry.at >= this.options.cacheMs) {
      if (this.cache.size >= 4_096) for (const [d, e] of this.cache) if (now - e.at >= this.options.cacheMs) this.cache.delete(d);
      entry = { at: now, answer: this.lookup(domain) };
      this.cache.set(domain, entry);
    }
    return dnsVerdict(domain, await entry.answer, this.options.publicAddresses ?? interfaceAddresses());
  }

  private resolverLookup(): (domain: string) => Promise<DnsAnswer> {
    const resolver = new Resolver({ timeout: this.options.timeoutMs, tries: 1 });
    if (this.options.server !== null) resolver.setServers([this.options.server]);
    const family = (query: Promise<string[]>) =>
      query.then(
        (addresses) => ({ addresses, error: null }),
        (error: unknown) => ({ addresses: [] as string[], error: EMPTY_CODES.has((error as NodeJS.ErrnoException).code ?? '') ? null : errorMessage(error) }),
      );
    return async (domain) => {
      const [v4, v6] = await Promise.all([family(resolver.resolve4(domain)), family(resolver.resolve6(domain))]);
      return { addresses: [...v4.addresses, ...v6.addresses], error: v4.error ?? v6.error };
    };
  }
}
