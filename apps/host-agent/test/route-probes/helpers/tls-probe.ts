import { RouteProber } from '../../../src/route-probes/index.js';
import { silentLogger } from '../../proxy/helpers/harness.js';

// A prober aimed at a proxy's HTTPS port (what it reports is compared with
// testkit's opensslView: the certificate as `openssl s_client` sees it).

/** A prober over TLS to the proxy on 127.0.0.1:`httpsPort` (each test drives it with probeNext()). */
export function tlsProber(httpsPort: number, timeoutMs: number): RouteProber {
  return new RouteProber({
    intervalMs: 60_000,
    timeoutMs,
    ratePerSecond: 20,
    target: async () => ({ host: '127.0.0.1', port: httpsPort, tls: true }),
    logger: silentLogger,
  });
}
