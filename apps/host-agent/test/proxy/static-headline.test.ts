import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCKER_SOCKET, TEST_IMAGE, caddyLoadCount, ensureCaddy, ensureKnot, ensureDocker, startCaddy, type TestCaddy } from '@tether/testkit';
import { serviceUpstream, type Route } from '@tether/protocol';
import { LABELS, ensureNetwork } from '../../src/docker/docker-client.js';
import { dockerEndpoints, type StaticRoutingController } from '../../src/proxy/index.js';
import { startAdminWitness, type AdminWitness } from './helpers/admin-witness.js';
import { mapOf, removeTempDirs, startNamedServer, tempDir } from './helpers/harness.js';
import { getWithMarker, staticController } from './helpers/static-harness.js';
import { WebSocket } from 'ws';
import { startEchoServer, type EchoServer } from './helpers/ws-echo.js';

// Issue 21's headline, with a real Caddy 2.6, a real knotd and real Docker: a
// WebSocket to service A, echoing a message every 100 ms in order, stays open
// while routes come and go, prefixes are added on service B's domain and B is
// redeployed twice (new containers, new addresses); Caddy is never loaded
// after start. Then, quietly: how long a new route takes to answer and a
// removed one to stop, against the bound lookup refresh + 2 s.

const docker = new Docker({ socketPath: DOCKER_SOCKET });
const ready =
  (await ensureDocker()).available &&
  (await ensureCaddy()).available &&
  (await ensureKnot()).available;
const run = `static-${process.pid}`;
const network = `tether-${run}`;
const REFRESH_MS = 500;
const BOUND_MS = REFRESH_MS + 2_000;

describe.skipIf(!ready)('static proxy: a WebSocket survives every routing change and two redeploys', () => {
  let caddy: TestCaddy;
  let witness: AdminWitness;
  let controller: StaticRoutingController;
  let echo: EchoServer;
  let other: Awaited<ReturnType<typeof startNamedServer>>;
  const b = { serviceId: 'svc_b', domain: 'b.example.test' };
  let routes: Route[] = [];

  async function deployB(version: string): Promise<string> {
    const c = await docker.createContainer({
      Image: TEST_IMAGE,
      Labels: { 'tether.test': run, [LABELS.managed]: 'true', [LABELS.node]: run, [LABELS.service]: b.serviceId },
      Cmd: ['sh', '-c', `mkdir -p /www/q && echo ${version} > /www/index.html && echo ${version} > /www/q/index.html && exec httpd -f -p 8080 -h /www`],
      NetworkingConfig: { EndpointsConfig: { [network]: {} } },
    });
    await c.start();
    return c.id;
  }

  const apply = async (next: Route[]) => {
    routes = next;
    const result = await controller.apply(mapOf(next));
    expect(result.error).toBeNull();
    expect(result.reloaded).toBe(false);
  };
  const chat: Route = { domain: 'chat.example.test', pathPrefix: null, serviceId: 'svc_a', upstream: '' };

  beforeAll(async () => {
    await ensureNetwork(docker, network);
    caddy = await startCaddy();
    witness = await startAdminWitness({ port: caddy.adminPort });
    echo = await startEchoServer();
    other = await startNamedServer('other');
    chat.upstream = `127.0.0.1:${echo.port}`;
    controller = await staticController({
      adminUrl: witness.url,
      adminListen: `127.0.0.1:${caddy.adminPort}`,
      stateDir: await tempDir(),
      httpPort: caddy.httpPort,
      lookupRefreshMs: REFRESH_MS,
      endpoints: dockerEndpoints(docker, { network, node: run }),
    });
    await controller.start();
  });

  afterAll(async () => {
    await controller?.stop();
    await controller?.knot.destroy();
    const leftovers = await docker.listContainers({ all: true, filters: { label: [`tether.test=${run}`] } });
    await Promise.all(leftovers.map((c) => docker.getContainer(c.Id).remove({ force: true })));
    await docker.getNetwork(network).remove().catch(() => undefined);
    await Promise.all([echo?.close(), other?.close(), witness?.close()]);
    await caddy?.stop();
    await removeTempDirs();
  });

  /** Polls until `check` holds; the time it took, or throws past `limitMs`. */
  async function timeUntil(check: () => Promise<boolean>, limitMs: number, what: string): Promise<number> {
    const started = performance.now();
    while (performance.now() - started < limitMs + 1_000) {
      if (await check().catch(() => false)) return performance.now() - started;
      await new Promise((r) => setTimeout(r, 25));
    }
    throw new Error(`${what}: not within ${limitMs + 1_000} ms`);
  }
  const body = async (domain: string, p = '/') => (await getWithMarker(caddy.httpPort, domain, p)).body.trim();

  it('20 attached, 10 detached, 5 prefixes on B, B redeployed twice: the WebSocket echoes every 100 ms in order, no load', async () => {
    const first = await deployB('B v1');
    const bRoute: Route = { domain: b.domain, pathPrefix: null, serviceId: b.serviceId, upstream: serviceUpstream('b', 8080) };
    await apply([chat, bRoute]);
    await timeUntil(async () => (await body(b.domain)) === 'B v1', BOUND_MS, 'B v1 reachable');
    const loadsAfterStart = witness.loads;
    const caddyLoads = await caddyLoadCount(caddy.adminUrl);
    const reloadsAfterStart = controller.status().reloadsTotal;
    expect(loadsAfterStart).toBe(1);
    expect(caddyLoads).toBeGreaterThanOrEqual(1);

    // The customer's connection: one message every 100 ms, each echo checked in order.
    const socket = new WebSocket(`ws://127.0.0.1:${caddy.httpPort}/`, { headers: { host: chat.domain } });
    await new Promise<void>((resolve, reject) => (socket.once('open', resolve), socket.once('error', reject)));
    let closedWith: number | null = null;
    socket.on('close', (code) => (closedWith = code));
    let sent = 0;
    const echoes: number[] = [];
    socket.on('message', (data: Buffer) => echoes.push(Number(data.toString('utf8'))));
    const ticker = setInterval(() => socket.readyState === WebSocket.OPEN && socket.send(String(sent++)), 100);

    const extra = (i: number): Route => ({ domain: `app${i}.example.test`, pathPrefix: null, serviceId: b.serviceId, upstream: serviceUpstream('b', 8080) });
    try {
      for (let i = 0; i < 20; i += 1) await apply([...routes, extra(i)]);
      for (let i = 0; i < 10; i += 1) await apply(routes.filter((r) => r.domain !== `app${i}.example.test`));
      for (let i = 0; i < 5; i += 1) await apply([...routes, { domain: b.domain, pathPrefix: `/p${i}`, serviceId: 'svc_other', upstream: `127.0.0.1:${other.port}` }]);
      await timeUntil(async () => (await body(b.domain, '/p4/x')) === 'other /p4/x', BOUND_MS, 'prefix /p4');
      // A first segment with no prefix route of its own falls back to the domain's service.
      expect(await body(b.domain, '/q/')).toBe('B v1');
      expect(await body('app15.example.test')).toBe('B v1');

      // Two redeploys of B: a new container, then the old one goes.
      let previous = first;
      for (const version of ['B v2', 'B v3']) {
        const next = await deployB(version);
        await docker.getContainer(previous).remove({ force: true });
        await timeUntil(async () => (await body(b.domain)) === version, BOUND_MS, `${version} reachable`);
        previous = next;
      }
      await new Promise((r) => setTimeout(r, 500));
    } finally {
      clearInterval(ticker);
    }
    await new Promise((r) => setTimeout(r, 300));
    expect(closedWith).toBeNull();
    expect(socket.readyState).toBe(WebSocket.OPEN);
    expect(sent).toBeGreaterThan(20);
    expect(echoes).toEqual([...Array(sent).keys()]);
    socket.close();

    expect(witness.loads).toBe(loadsAfterStart);
    expect(witness.loadAttempts).toBe(loadsAfterStart);
    expect(await caddyLoadCount(caddy.adminUrl)).toBe(caddyLoads);
    expect(controller.status().reloadsTotal).toBe(reloadsAfterStart);
    expect(controller.adminCalls.loads).toBe(1);
  });

  it('quiet: a new route answers, and a removed one stops, within lookup refresh + 2 s', async () => {
    const fresh: Route = { domain: 'fresh.example.test', pathPrefix: null, serviceId: 'svc_other', upstream: `127.0.0.1:${other.port}` };
    const added = performance.now();
    await apply([...routes, fresh]);
    const reach = await timeUntil(async () => (await body(fresh.domain)) === 'other /', BOUND_MS, 'new route');
    const reachMs = performance.now() - added;
    const removed = performance.now();
    await apply(routes.filter((r) => r.domain !== fresh.domain));
    await timeUntil(async () => (await getWithMarker(caddy.httpPort, fresh.domain)).marker === 'no-route', BOUND_MS, 'removed route');
    const stopMs = performance.now() - removed;
    // Moving a domain between services is bounded by the lookup refresh (Caddy's SRV cache).
    const moved = performance.now();
    await apply(routes.map((r) => (r.domain === 'app15.example.test' ? { ...r, serviceId: 'svc_other', upstream: `127.0.0.1:${other.port}` } : r)));
    await timeUntil(async () => (await body('app15.example.test')) === 'other /', BOUND_MS, 'moved route');
    const moveMs = performance.now() - moved;
    console.log(`static proxy: new route reached in ${reachMs.toFixed(0)} ms (first poll ${reach.toFixed(0)}), removed route stopped in ${stopMs.toFixed(0)} ms, moved route in ${moveMs.toFixed(0)} ms (bound ${BOUND_MS} ms)`);
    expect(reachMs).toBeLessThan(BOUND_MS);
    expect(stopMs).toBeLessThan(BOUND_MS);
    expect(moveMs).toBeLessThan(BOUND_MS);
    expect(witness.loads).toBe(1);
  });
});
