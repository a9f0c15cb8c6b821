import type { Logger } from '@tether/common';
import type { AgentConfig } from '../config.js';
import type { RoutingController } from '../controllers.js';
import { layered } from '../routing-layer.js';
import { CADDY_CONTAINER } from '../proxy/caddy-image.js';
import { issuanceLogPaths } from '../proxy/issuance-logging.js';
import { DnsCheck } from './dns-check.js';
import { IssuanceLog } from './issuance-log.js';
import type { ProbeTarget } from './route-probe.js';
import { RouteProber } from './route-prober.js';

export { judge, probeRoute, PROBE_HEADER, type ProbeTarget } from './route-probe.js';
export { RouteProber, type RouteProberOptions } from './route-prober.js';
export { DnsCheck, dnsVerdict, interfaceAddresses, type DnsVerdict } from './dns-check.js';
export { IssuanceLog, IssuanceErrors, LineSplitter, parseIssuanceLine, describeIssuanceError } from './issuance-log.js';

/** How often the agent reads what Caddy appended to its issuance log. */
export const ISSUANCE_LOG_POLL_MS = 1_000;

/**
 * Where the agent reaches its proxy's customer-facing server: the operator's Caddy on loopback, or the proxy
 * container at its address on Tether's network. (TLS with the ACME issuer: each name's DNS is checked before
 * its probe, see withRouteProbes.)
 */
export function probeTarget(config: AgentConfig, proxyAddress?: () => Promise<string | null>): (() => Promise<ProbeTarget | null>) | null {
  const p = config.proxy;
  if (config.routeProbes.intervalMs === 0 || p.kind === 'none') return null;
  const tls = p.tls === 'auto';
  if (p.kind === 'external') {
    const target: ProbeTarget = { host: '127.0.0.1', port: tls ? p.httpsPort : p.httpPort, tls };
    return async () => target;
  }
  if (!proxyAddress) return null;
  return async () => {
    const address = await proxyAddress();
    return address === null ? null : { host: address, port: tls ? CADDY_CONTAINER.httpsPort : CADDY_CONTAINER.httpPort, tls };
  };
}

/** The routing controller with route probes: the applied map's routes probed, their last probes in its status. */
export function withRouteProbes(routing: RoutingController, config: AgentConfig, deps: { logger: Logger; target: (() => Promise<ProbeTarget | null>) | null; onStateChange?: () => void }): RoutingController {
  if (deps.target === null) return routing;
  const p = config.proxy;
  const rp = config.routeProbes;
  // A probe's SNI makes Caddy try ACME on demand: only for a name whose DNS points here (dns-check.ts).
  const dns = p.tls === 'auto' && p.tlsIssuer === 'acme' ? new DnsCheck({ server: rp.dnsServer, cacheMs: rp.dnsCacheMs, timeoutMs: Math.min(rp.timeoutMs, 2_000), publicAddresses: rp.publicAddresses }) : null;
  // The static config makes Caddy write its issuance log (proxy/issuance-logging.ts): the CA's errors reach the status.
  const issuance = p.tls === 'auto' ? new IssuanceLog({ path: issuanceLogPaths(p, config.stateDir).agentPath, pollMs: ISSUANCE_LOG_POLL_MS, logger: deps.logger }) : null;
  const prober = new RouteProber({
    intervalMs: config.routeProbes.intervalMs,
    timeoutMs: config.routeProbes.timeoutMs,
    ratePerSecond: config.routeProbes.ratePerSecond,
    target: deps.target,
    logger: deps.logger,
    ...(deps.onStateChange ? { onStateChange: deps.onStateChange } : {}),
    ...(dns ? { dnsCheck: (domain: string) => dns.check(domain) } : {}),
    ...(issuance ? { issuanceError: (domain: string) => issuance.errorFor(domain), issuanceCatchUp: () => issuance.poll() } : {}),
  });
  return layered(routing, {
    start() {
      issuance?.start();
      prober.start();
    },
    async stop() {
      await prober.stop();
      await issuance?.stop();
    },
    applied: (map) => prober.setRoutes(map.routes),
    status: (status) => ({ ...status, probes: prober.results(), probeIntervalMs: prober.intervalMs }),
    members: { probesRoutes: true },
  });
}
