// Cross-node routing benchmark (issue 37): p50/p99 of a GET through a node
// whose own replica serves the route, against one through a node with no
// replica of it (its answers name the other node's private endpoint: one hop
// over the private network, the published port's DNAT, then the replica),
// same run, requests interleaved. Two hosts made by testkit's
// createHostNetwork (network namespaces, their own Docker engines, joined by
// a bridge), a real panel (apps/control-panel/dist) on an embedded
// PostgreSQL, a real agent per host (apps/host-agent/dist) with Caddy and
// the answerer in containers. The load runs inside the hub namespace: one
// keep-alive connection per target, sequential GETs.
//
//   cd bench && npx tsx cross-node.ts [--requests 4000] [--rounds 3]
//
// Needs root, Docker, and a build (npm run build). Figures go to
// docs/benchmarks.md, section "Cross-node routing".
import os from 'node:os';
import { parseArgs } from 'node:util';
import { ensureWebImage, waitFor } from '@tether/testkit';
import { startNetnsBench } from './netns-panel.js';

const { values } = parseArgs({ options: { requests: { type: 'string', default: '4000' }, rounds: { type: 'string', default: '3' } } });
const REQUESTS = Number(values.requests);
const ROUNDS = Number(values.rounds);
const DOMAIN = 'bench.example.test';

/** Runs inside the hub: alternates GETs to each target over one keep-alive connection each, prints latencies per target. */
const LOAD = `
const http = require('node:http');
const [targets, n, domain] = [JSON.parse(process.argv[1]), Number(process.argv[2]), process.argv[3]];
const agents = targets.map(() => new http.Agent({ keepAlive: true, maxSockets: 1 }));
const get = (t, agent) => new Promise((resolve) => {
  const started = process.hrtime.bigint();
  const req = http.get({ host: t, port: 80, path: '/', headers: { host: domain }, agent }, (res) => {
    res.resume();
    res.on('end', () => resolve({ ms: Number(process.hrtime.bigint() - started) / 1e6, ok: res.statusCode === 200 }));
  });
  req.on('error', () => resolve({ ms: Number(process.hrtime.bigint() - started) / 1e6, ok: false }));
});
(async () => {
  const out = targets.map(() => ({ ms: [], failed: 0 }));
  for (let i = 0; i < 200; i++) for (const [k, t] of targets.entries()) await get(t, agents[k]);
  for (let i = 0; i < n; i++) {
    for (const [k, t] of targets.entries()) {
      const r = await get(t, agents[k]);
      if (r.ok) out[k].ms.push(r.ms); else out[k].failed++;
    }
  }
  process.stdout.write(JSON.stringify(out));
})();
`;

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? NaN;

async function main(): Promise<void> {
  const image = await ensureWebImage();
  const bench = await startNetnsBench({
    tag: 'bxn',
    hosts: 2,
    image,
    panelEnv: { TETHER_SCHEDULER_INTERVAL_MS: '200', TETHER_MAX_CONNECTIONS_PER_ADDRESS: '1000' },
    lookupRefreshMs: 1_000,
    remoteProbeMs: 1_000,
  });
  const { net, api } = bench;
  try {
    const names = ['with-replica', 'without-replica'];
    for (const [i, host] of net.hosts.entries()) {
      const id = await bench.addNode(host, names[i]!);
      if (i === 1) await api('PATCH', `/v1/nodes/${id}`, { labels: { 'tether.io/ingress': 'true' } });
    }
    await waitFor(async () => (await bench.connected()).size === names.length, { timeoutMs: 120_000, message: 'both agents connected' });
    const team = await api('POST', '/v1/teams', { name: 'bench' });
    const service = await api('POST', '/v1/services', { teamId: team.id, name: 'web', image, internalPort: 8080, replicas: 1, placement: { nodes: ['with-replica'] } });
    await api('POST', '/v1/routes', { domain: DOMAIN, serviceId: service.id });
    const deployment = await api('POST', `/v1/services/${service.id as string}/deployments`, {});
    await waitFor(async () => (await api('GET', `/v1/deployments/${deployment.id as string}`)).status === 'running', { timeoutMs: 120_000, message: 'deployed' });
    const visitor = await net.client(net.hub.netns);
    for (const host of net.hosts) {
      await waitFor(async () => (await visitor.get({ address: host.address, port: 80, host: DOMAIN, path: '/', timeoutMs: 2_000 })).status === 200, {
        timeoutMs: 60_000,
        message: `${host.address} answers ${DOMAIN}`,
      });
    }
    await visitor.close();
    console.log(`cross-node: ${REQUESTS} GETs per target per round, interleaved, keep-alive, from the hub; ${os.cpus().length} CPUs`);
    const ratios: number[] = [];
    for (let round = 1; round <= ROUNDS; round++) {
      const run = await net.exec(net.hub.netns, process.execPath, ['-e', LOAD, JSON.stringify(net.hosts.map((h) => h.address)), String(REQUESTS), DOMAIN]);
      if (run.code !== 0) throw new Error(`load failed: ${run.stderr}`);
      const [local, remote] = (JSON.parse(run.stdout) as { ms: number[]; failed: number }[]).map((r) => ({ ...r, ms: r.ms.sort((a, b) => a - b) }));
      const line = (label: string, r: { ms: number[]; failed: number }) => `${label} p50 ${pct(r.ms, 0.5).toFixed(2)} ms, p99 ${pct(r.ms, 0.99).toFixed(2)} ms, failed ${r.failed}`;
      const ratio = pct(remote!.ms, 0.99) / pct(local!.ms, 0.99);
      ratios.push(ratio);
      console.log(`round ${round}: ${line('local', local!)} | ${line('no local replica', remote!)} | p99 ratio ${ratio.toFixed(2)}, p50 ratio ${(pct(remote!.ms, 0.5) / pct(local!.ms, 0.5)).toFixed(2)}`);
    }
    console.log(`p99 ratios: ${ratios.map((r) => r.toFixed(2)).join(', ')} (goal ≤ 1.3)`);
  } finally {
    await bench.close();
  }
}

await main();
