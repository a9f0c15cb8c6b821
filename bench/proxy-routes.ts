// Static proxy benchmark (issue 21, 34): N domains on one Caddy 2.6, requests
// through the static config (routes looked up against knotd, cached by Caddy
// for `refresh`) and through the per-route config older agents rendered, in
// the same run, same Caddy, same upstream. Prints p50/p99 of each and their
// ratio, how many of the static run's requests looked up (knotd's own query
// counters), the lookup rate at about 1,000 requests/s over every name, and
// p99 of known names while another client floods unknown Host names and
// random first segments (never cached), with the load average at each step.
//
//   cd bench && npx tsx proxy-routes.ts [--domains 1000] [--requests 5000] [--seconds 5] [--refresh 1000]
//
// Needs caddy, knotd and knotc on PATH (apt-get install caddy knot). Figures go
// to docs/benchmarks.md, section "Static proxy". Caddy asks knotd directly, as
// the agent configures it (runs before 2026-12-05 went through a relay in this
// process, which added its own hop to every lookup: proxy-miss-cost.ts).
import http from 'node:http';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { perRouteBaseline } from './per-route-baseline.js';
import { get, sequential, startRig } from './static-proxy-rig.js';

const { values } = parseArgs({
  options: { domains: { type: 'string', default: '1000' }, requests: { type: 'string', default: '5000' }, seconds: { type: 'string', default: '5' }, refresh: { type: 'string', default: '1000' } },
});
const DOMAINS = Number(values.domains);
/** Caddy's lookup refresh (the agent's TETHER_PROXY_LOOKUP_REFRESH_MS, default 1000). */
const REFRESH_MS = Number(values.refresh);
const REQUESTS = Number(values.requests);
const SECONDS = Number(values.seconds);
/** Requests before each measured run: one pass over every name (at least 500), so both configs are measured warm. */
const WARM_UP = Math.max(500, DOMAINS);
const load = () => os.loadavg().map((l) => l.toFixed(2)).join(' ');
const sum = (counts: Record<string, number>) => Object.values(counts).reduce((a, b) => a + b, 0);

async function main() {
  const rig = await startRig(DOMAINS);
  const { caddy, names } = rig;
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const loads: string[] = [];
  try {
    // Per-route config (the baseline: bench/per-route-baseline.ts).
    const perRoute = perRouteBaseline({ adminUrl: caddy.adminUrl, adminTimeoutMs: 60_000, serving: { httpPort: caddy.httpPort } });
    await perRoute.start();
    await perRoute.apply(rig.map);
    await sequential(caddy.httpPort, names, WARM_UP, agent);
    loads.push(load());
    const config = await sequential(caddy.httpPort, names, REQUESTS, agent);
    await perRoute.stop();

    // Static config, Caddy's resolver pointed at knotd.
    const statik = await rig.startStatic(`udp/127.0.0.1:${rig.knotPort}`, { lookupRefreshMs: REFRESH_MS });
    const loadsAtStart = statik.loads();
    await sequential(caddy.httpPort, names, WARM_UP, agent);
    loads.push(load());
    const before = sum(await rig.lookups());
    const dynamic = await sequential(caddy.httpPort, names, REQUESTS, agent);
    const lookedUp = sum(await rig.lookups()) - before;

    // About 1,000 requests/s over all names for SECONDS: how many lookups reach the answerer.
    const pacedBefore = sum(await rig.lookups());
    const paced = new http.Agent({ keepAlive: true, maxSockets: 8 });
    const started = performance.now();
    let sent = 0;
    const inflight: Promise<number>[] = [];
    while (performance.now() - started < SECONDS * 1_000) {
      const due = Math.floor(((performance.now() - started) / 1_000) * 1_000);
      for (; sent < due; sent += 1) inflight.push(get(caddy.httpPort, names[Math.floor(Math.random() * names.length)] as string, paced));
      await new Promise((r) => setTimeout(r, 5));
    }
    await Promise.all(inflight);
    const elapsed = (performance.now() - started) / 1_000;
    const lookupsPerSecond = (sum(await rig.lookups()) - pacedBefore) / elapsed;

    // Known names while a second client floods unknown Host names and random first segments.
    let flooding = true;
    const floodAgent = new http.Agent({ keepAlive: true, maxSockets: 4 });
    let floodRequests = 0;
    const flood = (async () => {
      while (flooding) {
        const r = Math.random().toString(36).slice(2, 10);
        await Promise.all([get(caddy.httpPort, `${r}.unknown.example.com`, floodAgent), get(caddy.httpPort, 'app-0.bench.example.com', floodAgent, `/${r}/x`)]);
        floodRequests += 2;
      }
    })();
    loads.push(load());
    const underFlood = await sequential(caddy.httpPort, names, Math.min(REQUESTS, 2_000), agent);
    flooding = false;
    await flood;

    const f = (n: number) => n.toFixed(2);
    console.log(`domains ${DOMAINS} (+${rig.routes.length - DOMAINS} /api prefixes), refresh ${REFRESH_MS} ms, ${REQUESTS} sequential keep-alive GETs over all names after ${WARM_UP} to warm up, Caddy loads after start: ${statik.loads() - loadsAtStart}`);
    console.log(`per-route config: p50 ${f(config.p50)} ms, p99 ${f(config.p99)} ms, errors ${config.errors}`);
    console.log(`static config   : p50 ${f(dynamic.p50)} ms, p99 ${f(dynamic.p99)} ms, errors ${dynamic.errors}; queries at the answerer ${lookedUp} (${f(lookedUp / REQUESTS)} a request)`);
    console.log(`ratio static/per-route: p50 ${f(dynamic.p50 / config.p50)}, p99 ${f(dynamic.p99 / config.p99)}`);
    console.log(`~1,000 req/s over ${names.length} names for ${SECONDS} s (${sent} requests): ${lookupsPerSecond.toFixed(0)} queries/s at the answerer`);
    console.log(`under a flood of unknown names and random segments (${floodRequests} flood requests): known names p50 ${f(underFlood.p50)} ms, p99 ${f(underFlood.p99)} ms, errors ${underFlood.errors}`);
    console.log(`load average (1, 5, 15 min) before per-route / static / flood: ${loads.join(' | ')}; after: ${load()}`);
    await statik.stop();
  } finally {
    agent.destroy();
    await rig.close();
  }
}

await main();
