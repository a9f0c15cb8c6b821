import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCKER_SOCKET, ensureCaddy, ensureDocker, ensureKnot, freePort, spawnProcess, waitFor, type ManagedProcess } from '@tether/testkit';
import type { Route } from '@tether/protocol';
import { LABELS, ensureNetwork } from '../../src/docker/docker-client.js';
import { createContainerRoutingController, dockerEndpoints, type KnotContainerAnswerer, type StaticRoutingController } from '../../src/proxy/index.js';
import type { CaddyContainer } from '../../src/proxy/caddy-container.js';
import { startAdminWitness, type AdminWitness } from './helpers/admin-witness.js';
import { removeRun, startServiceContainer } from './helpers/container-harness.js';
import { mapOf, removeTempDirs, silentLogger, startNamedServerAt, tempDir } from './helpers/harness.js';
import { getWithMarker, killRestartFreeze } from './helpers/static-harness.js';
import { connectThroughProxy, startEchoServer } from './helpers/ws-echo.js';

// Static routing in container mode (issue 21), all real: Docker, the Caddy
// container built from Debian's caddy, the answerer container built from
// Debian's knotd in Caddy's network namespace. Routes come and go without a
// load, a WebSocket stays open through churn, the answerer killed or frozen
// is replaced within its bound while Caddy serves cached answers, a
// recreated Caddy takes a new answerer along, and an agent SIGKILLed and
// restarted leaves every domain answering. Services: node servers on the test
// network's gateway address (reachable from the Caddy container) and one busybox container.

const docker = new Docker({ socketPath: DOCKER_SOCKET });
const ready = (await ensureDocker()).available && (await ensureCaddy()).available && (await ensureKnot()).available;
const which = (bin: string) => (ready ? execFileSync('sh', ['-c', `command -v ${bin}`], { encoding: 'utf8' }).trim() : '');
const caddyBinary = which('caddy');
const knotd = which('knotd');
const knotc = which('knotc');
const script = path.join(path.dirname(fileURLToPath(import.meta.url)), 'helpers', 'static-container-agent-process.mjs');
const run = `statictest-${process.pid}`;
const network = `tether-${run}`;
const CHECK_MS = 250;
const PROBE_MS = 300;
const REFRESH_MS = 1_500;
/** The documented outage bound: one check interval + one probe + a container replaced (remove, create, start, first answer). */
const RESTART_BOUND_MS = CHECK_MS + PROBE_MS + 3_000;

describe.skipIf(!ready)('static proxy in container mode: Caddy and the answerer as containers', () => {
  let witness: AdminWitness;
  let controller: StaticRoutingController;
  let container: CaddyContainer;
  let answerer: KnotContainerAnswerer;
  let httpPort: number;
  let gateway: string;
  let stateDir: string;
  let options: Record<string, unknown>;
  let agent: ManagedProcess | null = null;
  const closers: Array<() => Promise<void>> = [];
  const routes: Route[] = [];
  const servers: Record<string, number> = {};

  const route = (domain: string, upstream: string, serviceId: string, pathPrefix: string | null = null): Route => ({ domain, pathPrefix, serviceId, upstream });
  const body = async (domain: string, p = '/') => (await getWithMarker(httpPort, domain, p).catch((e: Error) => ({ status: 0, body: e.message, marker: null }))).body;
  const answererContainers = () => docker.listContainers({ all: true, filters: { label: [`${LABELS.role}=answerer`, `${LABELS.node}=${run}`] } });

  beforeAll(async () => {
    await ensureNetwork(docker, network);
    gateway = (await docker.getNetwork(network).inspect()).IPAM?.Config?.[0]?.Gateway as string;
    for (const name of ['one', 'two', 'three', 'canary']) {
      const s = await startNamedServerAt(gateway, name);
      servers[name] = s.port;
      closers.push(() => s.close());
    }
    const echo = await startEchoServer(gateway);
    servers.echo = echo.port;
    closers.push(() => echo.close());
    // A service container, found by its labels like the agent's own: its route's SRV target is the container.
    await startServiceContainer(docker, { network, run, service: 'web' });

    stateDir = await tempDir();
    witness = await startAdminWitness({ socketPath: path.join(stateDir, 'caddy', 'run', 'admin.sock') });
    httpPort = await freePort();
    options = {
      network,
      node: run,
      stateDir,
      caddyBinary,
      knotd,
      knotc,
      bindAddress: '127.0.0.1',
      serving: { tls: 'off', httpPort, httpsPort: 443 },
      adminTimeoutMs: 5_000,
      checkIntervalMs: CHECK_MS,
      answersIntervalMs: CHECK_MS,
      answererProbeTimeoutMs: PROBE_MS,
      lookupRefreshMs: REFRESH_MS,
      answererPort: 5399,
      askPort: await freePort(),
      issuer: 'internal',
      canary: { port: 9080, upstream: `${gateway}:${servers.canary}` },
      adminUrl: witness.url,
    };
    ({ controller, container, answerer } = createContainerRoutingController({
      ...(options as Omit<Parameters<typeof createContainerRoutingController>[0], 'docker' | 'logger' | 'endpoints'>),
      docker,
      logger: silentLogger,
      endpoints: dockerEndpoints(docker, { network, node: run }),
    }));
  }, 120_000);

  afterAll(async () => {
    if (agent) process.kill(agent.pid, 'SIGCONT');
    await agent?.stop(1_000);
    await controller?.stop();
    await answerer?.destroy();
    await container?.remove();
    await removeRun(docker, run, network);
    await witness?.close();
    await Promise.all(closers.map((c) => c()));
    await removeTempDirs();
  }, 60_000);

  it('routes attached, moved and removed reach or leave their service within refresh + 2 s; one load in all', async () => {
    await controller.start();
    expect(witness.loads).toBe(1);
    const [answererInfo] = await answererContainers();
    const caddyInfo = await container.running();
    const inspect = await docker.getContainer(answererInfo!.Id).inspect();
    // In Caddy's network namespace, with no address or port of its own.
    expect(inspect.HostConfig.NetworkMode).toBe(`container:${caddyInfo!.id}`);
    expect(inspect.HostConfig.PortBindings ?? {}).toEqual({});
    expect(answerer.caddyAddress).toBe('udp/127.0.0.1:5399');

    routes.push(route('one.example.test', `${gateway}:${servers.one}`, 'one'), route('web.example.test', 'svc-web:8080', 'web'));
    expect(await controller.apply(mapOf(routes))).toMatchObject({ changed: true, reloaded: false, error: null });
    expect(await body('one.example.test', '/x')).toBe('one /x');
    expect(await body('web.example.test')).toBe('hello from web\n');
    expect((await getWithMarker(httpPort, 'nothing.example.test')).marker).toBe('no-route');
    // The canary's route goes through the answerer too (Caddy's canary server, at its container's address).
    expect((await getWithMarker(9080, 'canary.tether.internal', '/probe', caddyInfo!.address!)).body).toBe('canary /probe');

    // Attach: a new name is never cached, so it is served at once.
    const attachAt = performance.now();
    routes.push(route('two.example.test', `${gateway}:${servers.two}`, 'two'));
    await controller.apply(mapOf(routes));
    await waitFor(async () => (await body('two.example.test')) === 'two /', { timeoutMs: REFRESH_MS + 2_000, intervalMs: 20, message: 'attached route' });
    const attachMs = performance.now() - attachAt;

    // Move to another port: the route's lookup file names the port, and Caddy's cache is keyed by name and port,
    // so the new port is a new lookup: served at once. (Another address on the same port waits for the refresh:
    // remote-routing.test.ts, "a local replica takes the route alone".)
    expect(await body('one.example.test')).toBe('one /');
    const moveAt = performance.now();
    routes[0] = route('one.example.test', `${gateway}:${servers.three}`, 'three');
    await controller.apply(mapOf(routes));
    const stillOld = await body('one.example.test');
    await waitFor(async () => (await body('one.example.test')) === 'three /', { timeoutMs: REFRESH_MS + 2_000, intervalMs: 20, message: 'moved route' });
    const moveMs = performance.now() - moveAt;

    // Remove: the domain file goes first, so the name is `no-route` at once.
    const removeAt = performance.now();
    routes.splice(1, 1);
    await controller.apply(mapOf(routes));
    await waitFor(async () => (await getWithMarker(httpPort, 'web.example.test')).marker === 'no-route', { timeoutMs: REFRESH_MS + 2_000, intervalMs: 20, message: 'removed route' });
    const removeMs = performance.now() - removeAt;
    console.log(`container static: attach ${attachMs.toFixed(0)} ms, move ${moveMs.toFixed(0)} ms (answer right after the push: ${stillOld}), remove ${removeMs.toFixed(0)} ms; bound ${REFRESH_MS + 2_000} ms`);
    expect(stillOld).toBe('three /');
    expect(moveMs).toBeLessThan(REFRESH_MS + 2_000);
    expect(witness.loads).toBe(1);
  }, 120_000);

  it('a WebSocket through Caddy stays open, every echo in order, while 10 routes are attached, 5 removed and 3 prefixes added', async () => {
    routes.push(route('chat.example.test', `${gateway}:${servers.echo}`, 'echo'));
    await controller.apply(mapOf(routes));
    const client = await connectThroughProxy(httpPort, 'chat.example.test');
    let sent = 0;
    let stop = false;
    const pinger = (async () => {
      while (!stop) {
        const text = `m${sent++}`;
        const got = await client.echo(text);
        if (got !== text) throw new Error(`echo ${got} for ${text}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const churn: number[] = [];
    for (let i = 0; i < 10; i += 1) {
      routes.push(route(`churn${i}.example.test`, `${gateway}:${servers.two}`, 'two'));
      const started = performance.now();
      expect(await controller.apply(mapOf(routes))).toMatchObject({ reloaded: false, error: null });
      churn.push(performance.now() - started);
    }
    for (let i = 0; i < 5; i += 1) {
      routes.splice(routes.findIndex((r) => r.domain === `churn${i}.example.test`), 1);
      expect(await controller.apply(mapOf(routes))).toMatchObject({ reloaded: false, error: null });
    }
    for (const seg of ['api', 'admin', 'docs']) {
      routes.push(route('churn9.example.test', `${gateway}:${servers.three}`, 'three', `/${seg}`));
      expect(await controller.apply(mapOf(routes))).toMatchObject({ reloaded: false, error: null });
    }
    expect(await body('churn9.example.test', '/api/x')).toBe('three /api/x');
    await new Promise((r) => setTimeout(r, 500));
    stop = true;
    await pinger;
    churn.sort((a, b) => a - b);
    console.log(`container static churn: ${sent} echoes in order; apply p50 ${churn[5]!.toFixed(0)} ms, max ${churn[9]!.toFixed(0)} ms`);
    expect(client.open).toBe(true);
    expect(sent).toBeGreaterThan(5);
    expect(witness.loads).toBe(1);
    client.close();
  }, 120_000);

  for (const fault of ['kill', 'pause'] as const) {
    it(`the answerer container ${fault === 'kill' ? 'killed' : 'frozen'}: replaced within ${RESTART_BOUND_MS} ms while Caddy serves its cached answers`, async () => {
      const [before] = await answererContainers();
      const restarts = answerer.status().restarts;
      expect(await body('two.example.test')).toBe('two /');
      const faultAt = performance.now();
      if (fault === 'kill') await docker.getContainer(before!.Id).kill();
      else await docker.getContainer(before!.Id).pause();
      // Within refresh of the last lookup, Caddy answers from its cache: the answerer is not asked.
      const cached = await body('two.example.test');
      const cachedAt = performance.now() - faultAt;
      while (performance.now() - faultAt < RESTART_BOUND_MS + 3_000) {
        // Back as the agent's health shows it (restarted, up) and as Caddy would ask it.
        const status = answerer.status();
        if (status.restarts > restarts && status.up && (await answerer.probe().then(() => true, () => false))) break;
        await new Promise((r) => setTimeout(r, 25));
      }
      const outageMs = performance.now() - faultAt;
      console.log(`answerer container ${fault}: answering again after ${outageMs.toFixed(0)} ms (bound ${RESTART_BOUND_MS} ms); cached answer at ${cachedAt.toFixed(0)} ms: ${cached}`);
      expect(cached).toBe('two /');
      expect(answerer.status()).toMatchObject({ up: true, restarts: restarts + 1 });
      expect(outageMs).toBeLessThan(RESTART_BOUND_MS);
      // Detection needs at least one failed probe.
      expect(outageMs).toBeGreaterThan(PROBE_MS / 2);
      const after = await answererContainers();
      expect(after.map((c) => c.Id)).not.toContain(before!.Id);
      expect(await body('one.example.test')).toBe('three /');
      expect(witness.loads).toBe(1);
    }, 60_000);
  }

  it('the Caddy container recreated: the answerer follows it into the new namespace', async () => {
    const old = await container.running();
    await docker.getContainer(old!.id).remove({ force: true });
    await waitFor(async () => (await body('one.example.test')) === 'three /', { timeoutMs: 30_000, message: 'served again after the proxy was recreated' });
    const now = await container.running();
    const [info] = await answererContainers();
    expect((await docker.getContainer(info!.Id).inspect()).HostConfig.NetworkMode).toBe(`container:${now!.id}`);
    // A new Caddy boots empty: its first load is `initial` (the only loads are Caddy's own starts).
    expect(witness.loads).toBe(2);
  }, 60_000);

  it('the agent SIGKILLed and restarted: every domain keeps answering, and the restarted agent changes nothing', async () => {
    await controller.stop();
    const loads = witness.loads;
    const startAgent = async () => {
      agent = spawnProcess(process.execPath, [script], { env: { STATIC_AGENT_OPTIONS: JSON.stringify({ ...options, routes }) } });
      await agent.waitForOutput(/static agent ready/, 60_000);
    };
    await startAgent();
    let stop = false;
    const failures: string[] = [];
    let n = 0;
    const poll = (async () => {
      while (!stop) {
        for (const [domain, want] of [['one.example.test', 'three /'], ['two.example.test', 'two /']] as const) {
          const got = await body(domain);
          n += 1;
          if (got !== want) failures.push(`${domain}: ${got}`);
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    await new Promise((r) => setTimeout(r, 500));
    await killRestartFreeze(() => agent!, startAgent, 3_000);
    stop = true;
    await poll;
    console.log(`container static through agent kill/freeze/restart: ${n} GETs, ${failures.length} failures`);
    expect(failures).toEqual([]);
    expect(n).toBeGreaterThan(100);
    expect(witness.loads).toBe(loads);
    // The restarted agent found the answerer answering with its settings: nothing started, nothing restarted.
    expect(agent!.output()).toMatch(/answerer \{"up":true,"starts":0,"restarts":0/);
  }, 120_000);
});
