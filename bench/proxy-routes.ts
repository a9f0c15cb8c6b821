// Static proxy benchmark (issue 21): 1,000 domains on one Caddy 2.6, requests
// through the static config (routes looked up per request by SRV against
// knotd) and through the per-route config the agent renders otherwise, in the
// same run, same Caddy, same upstream. Prints p50/p99 of each and their ratio,
// the answerer's query rate at about 1,000 requests/s over 1,000 names
// (Caddy's SRV cache holds 100), and p99 of known names while another client
// floods unknown Host names and random first segments (never cached).
//
//   cd bench && npx tsx proxy-routes.ts [--domains 1000] [--requests 5000] [--seconds 5]
//
// Needs caddy and knotd on PATH (apt-get install caddy knot). Figures go to
// docs/benchmarks.md, section "Static proxy".
import dgram from 'node:dgram';
import http from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { routingHash, type Route } from '@tether/protocol';
import { freePort, startCaddy } from '@tether/testkit';
import { createCaddyAdmin, KnotAnswerer, StaticRoutingController } from '../apps/host-agent/src/proxy/index.js';
import { perRouteBaseline } from './per-route-baseline.js';

const { values } = parseArgs({ options: { domains: { type: 'string', default: '1000' }, requests: { type: 'string', default: '5000' }, seconds: { type: 'string', default: '5' } } });
const DOMAINS = Number(values.domains);
const REQUESTS = Number(values.requests);
const SECONDS = Number(values.seconds);
const logger = { info: () => undefined, warn: () => undefined, error: () => undefined, debug: () => undefined } as never;
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

function get(port: number, host: string, p = '/', via = agent): Promise<number> {
  return new Promise((resolve) => {
    const req = http.request({ host: '127.0.0.1', port, path: p, headers: { host }, agent: via }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve(0));
    req.end();
  });
}

function pct(samples: number[]) {
  const s = [...samples].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)] as number;
  return { p50: at(0.5), p99: at(0.99) };
}

async function sequential(port: number, names: string[], n: number): Promise<{ p50: number; p99: number; errors: number }> {
  const times: number[] = [];
  let errors = 0;
  for (let i = 0; i < n; i += 1) {
    const started = performance.now();
    if ((await get(port, names[i % names.length] as string)) !== 200) errors += 1;
    times.push(performance.now() - started);
  }
  return { ...pct(times), errors };
}

/** A UDP relay in front of knotd that counts the queries Caddy sends. */
async function countingRelay(target: number): Promise<{ port: number; queries: () => number; close(): void }> {
  const front = dgram.createSocket('udp4');
  let queries = 0;
  front.on('message', (msg, from) => {
    queries += 1;
    const back = dgram.createSocket('udp4');
    let open = true;
    const close = () => {
      if (open) back.close();
      open = false;
    };
    back.on('message', (answer) => {
      front.send(answer, from.port, from.address);
      close();
    });
    back.send(msg, target, '127.0.0.1');
    setTimeout(close, 2_000).unref();
  });
  await new Promise<void>((resolve) => front.bind(0, '127.0.0.1', resolve));
  return { port: front.address().port, queries: () => queries, close: () => front.close() };
}

async function main() {
  const upstream = http.createServer((_req, res) => res.end('ok'));
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const upstreamPort = (upstream.address() as { port: number }).port;
  const routes: Route[] = Array.from({ length: DOMAINS }, (_, i) => ({ domain: `app-${i}.bench.example.com`, pathPrefix: null, serviceId: `svc_${i}`, upstream: `127.0.0.1:${upstreamPort}` }));
  for (let i = 0; i < DOMAINS; i += 10) routes.push({ domain: `app-${i}.bench.example.com`, pathPrefix: '/api', serviceId: `api_${i}`, upstream: `127.0.0.1:${upstreamPort}` });
  const names = routes.filter((r) => r.pathPrefix === null).map((r) => r.domain);
  const map = { version: 1, hash: routingHash(routes), routes };
  const caddy = await startCaddy();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tether-bench-static-'));
  const knotPort = await freePort();
  const answerer = new KnotAnswerer({ dir: path.join(dir, 'answerer'), listen: { host: '127.0.0.1', port: knotPort }, knotd: 'knotd', knotc: 'knotc', probeTimeoutMs: 500, logger });
  const relay = await countingRelay(knotPort);
  try {
    // Per-route config (the baseline: bench/per-route-baseline.ts).
    const perRoute = perRouteBaseline({ adminUrl: caddy.adminUrl, adminTimeoutMs: 60_000, serving: { httpPort: caddy.httpPort } });
    await perRoute.start();
    await perRoute.apply(map);
    await sequential(caddy.httpPort, names, 500);
    const config = await sequential(caddy.httpPort, names, REQUESTS);
    await perRoute.stop();

    // Static config, resolver through the counting relay.
    const stateDir = path.join(dir, 'static');
    const staticController = new StaticRoutingController({
      proxy: createCaddyAdmin({ adminUrl: caddy.adminUrl, timeoutMs: 60_000 }),
      render: {
        admin: { listen: `127.0.0.1:${caddy.adminPort}` },
        httpPort: caddy.httpPort,
        httpsPort: 443,
        tls: 'off',
        answerer: `udp/127.0.0.1:${relay.port}`,
        lookupRefreshMs: 1_000,
        answersDir: path.join(stateDir, 'answers'),
        askPort: await freePort(),
        issuer: 'internal',
      },
      answerer,
      endpoints: () => Promise.resolve(new Map()),
      configPath: path.join(stateDir, 'caddy.json'),
      statePath: path.join(stateDir, 'routing-state.json'),
      checkIntervalMs: 0,
      answersIntervalMs: 0,
      logger,
    });
    await staticController.start();
    const applied = await staticController.apply(map);
    if (applied.error) throw new Error(applied.error);
    await sequential(caddy.httpPort, names, 500);
    const dynamic = await sequential(caddy.httpPort, names, REQUESTS);

    // About 1,000 requests/s over all names for SECONDS: how many lookups reach the answerer.
    const before = relay.queries();
    const paced = new http.Agent({ keepAlive: true, maxSockets: 8 });
    const started = performance.now();
    let sent = 0;
    const inflight: Promise<number>[] = [];
    while (performance.now() - started < SECONDS * 1_000) {
      const due = Math.floor(((performance.now() - started) / 1_000) * 1_000);
      for (; sent < due; sent += 1) inflight.push(get(caddy.httpPort, names[Math.floor(Math.random() * names.length)] as string, '/', paced));
      await new Promise((r) => setTimeout(r, 5));
    }
    await Promise.all(inflight);
    const elapsed = (performance.now() - started) / 1_000;
    const lookupsPerSecond = (relay.queries() - before) / elapsed;

    // Known names while a second client floods unknown Host names and random first segments.
    let flooding = true;
    const floodAgent = new http.Agent({ keepAlive: true, maxSockets: 4 });
    let floodRequests = 0;
    const flood = (async () => {
      while (flooding) {
        const r = Math.random().toString(36).slice(2, 10);
        await Promise.all([get(caddy.httpPort, `${r}.unknown.example.com`, '/', floodAgent), get(caddy.httpPort, 'app-0.bench.example.com', `/${r}/x`, floodAgent)]);
        floodRequests += 2;
      }
    })();
    const underFlood = await sequential(caddy.httpPort, names, Math.min(REQUESTS, 2_000));
    flooding = false;
    await flood;

    const f = (n: number) => n.toFixed(2);
    console.log(`domains ${DOMAINS} (+${routes.length - DOMAINS} /api prefixes), ${REQUESTS} sequential keep-alive GETs over all names, Caddy loads after start: ${staticController.adminCalls.loads - 1}`);
    console.log(`per-route config: p50 ${f(config.p50)} ms, p99 ${f(config.p99)} ms, errors ${config.errors}`);
    console.log(`static config   : p50 ${f(dynamic.p50)} ms, p99 ${f(dynamic.p99)} ms, errors ${dynamic.errors}`);
    console.log(`ratio static/per-route: p50 ${f(dynamic.p50 / config.p50)}, p99 ${f(dynamic.p99 / config.p99)}`);
    console.log(`~1,000 req/s over ${names.length} names for ${SECONDS} s (${sent} requests): ${lookupsPerSecond.toFixed(0)} lookups/s at the answerer`);
    console.log(`under a flood of unknown names and random segments (${floodRequests} flood requests): known names p50 ${f(underFlood.p50)} ms, p99 ${f(underFlood.p99)} ms, errors ${underFlood.errors}`);
    await staticController.stop();
  } finally {
    relay.close();
    await answerer.destroy();
    await caddy.stop();
    upstream.close();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
