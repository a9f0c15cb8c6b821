// Failover benchmark (issue 38): time from a real network cut of the node
// running a service's replica to its replacement running on another node, and
// to the replacement answering through a third node's proxy. Three hosts made
// by testkit's createHostNetwork (network namespaces, their own Docker
// engines, joined by a bridge), a real panel (apps/control-panel/dist) on an
// embedded PostgreSQL, a real agent per host (apps/host-agent/dist) with Caddy
// and the answerer in containers. `fo-a` and `fo-c` take the 1-replica
// service; `fo-b` is cordoned, an entry point only (ingress label). Each run
// cuts the node holding the replica (iptables DROP both ways on its link),
// waits for the replacement on the other one, heals the cut node and waits
// for its old copy to be removed; the next run cuts the other way.
//
//   cd bench && npx tsx failover.ts [--runs 5] [--idle-ms 3000] [--grace-ms 5000]
//
// --idle-ms is the panel's read-idle deadline (TETHER_SESSION_IDLE_MS), --grace-ms
// TETHER_RESCHEDULE_AFTER_MS: the figures are those two plus what failover adds.
// Needs root, Docker, and a build (npm run build). Figures go to
// docs/benchmarks.md, section "Failover".
import os from 'node:os';
import { parseArgs } from 'node:util';
import { dockerApi, ensureWebImage, waitFor, type Host } from '@tether/testkit';
import { startNetnsBench } from './netns-panel.js';

const { values } = parseArgs({ options: { runs: { type: 'string', default: '5' }, 'idle-ms': { type: 'string', default: '3000' }, 'grace-ms': { type: 'string', default: '5000' } } });
const RUNS = Number(values.runs);
const IDLE_MS = Number(values['idle-ms']);
const GRACE_MS = Number(values['grace-ms']);
const DOMAIN = 'failover.example.test';

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

async function main(): Promise<void> {
  const image = await ensureWebImage();
  const bench = await startNetnsBench({
    tag: 'bfo',
    hosts: 3,
    image,
    panelEnv: {
      TETHER_SCHEDULER_INTERVAL_MS: '1000',
      TETHER_HEARTBEAT_INTERVAL_MS: String(Math.min(5_000, Math.floor(IDLE_MS / 3))),
      TETHER_PING_INTERVAL_MS: String(Math.min(30_000, Math.floor(IDLE_MS / 3))),
      TETHER_SESSION_IDLE_MS: String(IDLE_MS),
      TETHER_AGENT_IDLE_MS: String(IDLE_MS),
      TETHER_RESCHEDULE_AFTER_MS: String(GRACE_MS),
    },
    lookupRefreshMs: 1_000,
    remoteProbeMs: 1_000,
  });
  const { net, api, connected } = bench;
  try {
    const names = ['fo-a', 'fo-b', 'fo-c'];
    const ids = new Map<string, string>();
    for (const [i, host] of net.hosts.entries()) ids.set(names[i]!, await bench.addNode(host, names[i]!));
    await waitFor(async () => (await connected()).size === names.length, { timeoutMs: 120_000, message: 'three agents connected' });
    // fo-b an entry point only; fo-c closed while the first release lands on fo-a.
    await api('PATCH', `/v1/nodes/${ids.get('fo-b')!}`, { labels: { 'tether.io/ingress': 'true' } });
    await api('POST', `/v1/nodes/${ids.get('fo-b')!}/cordon`);
    await api('POST', `/v1/nodes/${ids.get('fo-c')!}/cordon`);
    const team = await api('POST', '/v1/teams', { name: 'bench' });
    const service = await api('POST', '/v1/services', { teamId: team.id, name: 'web', image, internalPort: 8080, replicas: 1 });
    const serviceId = service.id as string;
    await api('POST', '/v1/routes', { domain: DOMAIN, serviceId });
    const deployment = await api('POST', `/v1/services/${serviceId}/deployments`, {});
    await waitFor(async () => (await api('GET', `/v1/deployments/${deployment.id as string}`)).status === 'running', { timeoutMs: 120_000, message: 'deployed' });
    await api('POST', `/v1/nodes/${ids.get('fo-c')!}/uncordon`);

    const [hostA, hostB, hostC] = net.hosts as [Host, Host, Host];
    const visitor = await net.client(net.hub.netns);
    const viaB = () => visitor.get({ address: hostB.address, port: 80, host: DOMAIN, path: '/', timeoutMs: 1_000 });
    await waitFor(async () => (await viaB()).status === 200, { timeoutMs: 60_000, message: `fo-b answers ${DOMAIN}` });
    const running = async (host: Host) => {
      const filters = encodeURIComponent(JSON.stringify({ label: [`tether.service=${serviceId}`], status: ['running'] }));
      const res = await dockerApi('GET', `/containers/json?filters=${filters}`, undefined, undefined, host.daemon!.dockerHost.replace(/^unix:\/\//, ''));
      return (JSON.parse(res.body) as { Id: string }[]).length;
    };
    console.log(`failover: ${RUNS} runs, panel read-idle ${IDLE_MS} ms, reschedule after ${GRACE_MS} ms, scheduler interval 1000 ms, Caddy lookup refresh 1000 ms; ${os.cpus().length} CPUs`);
    const figures: { teardown: number; running: number; answering: number }[] = [];
    let [from, to] = [{ host: hostA, name: 'fo-a' }, { host: hostC, name: 'fo-c' }];
    for (let run = 1; run <= RUNS; run++) {
      await net.cut(from.host);
      const cutAt = performance.now();
      let teardown = NaN;
      let runningAt = NaN;
      let answeringAt = NaN;
      await waitFor(
        async () => {
          const now = performance.now();
          if (Number.isNaN(teardown) && !(await connected()).has(from.name)) teardown = now;
          if (Number.isNaN(runningAt) && (await running(to.host)) > 0) runningAt = now;
          if (Number.isNaN(answeringAt) && !Number.isNaN(runningAt) && (await viaB()).status === 200) answeringAt = performance.now();
          return Number.isNaN(answeringAt) ? undefined : true;
        },
        { timeoutMs: IDLE_MS + GRACE_MS + 60_000, intervalMs: 50, message: `run ${run}: the replacement on ${to.name} answering` },
      );
      const f = { teardown: teardown - cutAt, running: runningAt - cutAt, answering: answeringAt - cutAt };
      figures.push(f);
      console.log(`run ${run}: cut ${from.name}: torn down ${Math.round(f.teardown)} ms, replacement running on ${to.name} ${Math.round(f.running)} ms, answering through fo-b's proxy ${Math.round(f.answering)} ms after the cut`);
      await net.heal(from.host);
      await waitFor(async () => (await connected()).has(from.name) && (await running(from.host)) === 0, { timeoutMs: 60_000, message: `run ${run}: ${from.name} back, its old copy stopped` });
      [from, to] = [to, from];
    }
    const line = (key: keyof (typeof figures)[number]) => `median ${Math.round(median(figures.map((f) => f[key])))} ms (${figures.map((f) => Math.round(f[key])).join(', ')})`;
    console.log(`cut → teardown: ${line('teardown')}`);
    console.log(`cut → replacement running: ${line('running')}`);
    console.log(`cut → answering through another node's proxy: ${line('answering')}`);
    console.log(`beyond read-idle + grace (${IDLE_MS + GRACE_MS} ms): running ${Math.round(median(figures.map((f) => f.running)) - IDLE_MS - GRACE_MS)} ms, answering ${Math.round(median(figures.map((f) => f.answering)) - IDLE_MS - GRACE_MS)} ms (medians)`);
    await visitor.close();
  } finally {
    await bench.close();
  }
}

await main();
