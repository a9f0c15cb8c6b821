import { execFileSync } from 'node:child_process';
import path from 'node:path';
import Docker from 'dockerode';
import { afterAll, describe, expect, it } from 'vitest';
import { DOCKER_SOCKET, ensureCaddy, ensureDocker, ensureKnot, freePort, startCaddy } from '@tether/testkit';
import type { Route } from '@tether/protocol';
import { ensureNetwork } from '../../src/docker/docker-client.js';
import { CADDY_CONTAINER, CADDY_CONTAINER_ADMIN } from '../../src/proxy/caddy-image.js';
import { createContainerRoutingController, dockerEndpoints, type StaticRoutingController } from '../../src/proxy/index.js';
import { startAdminWitness } from './helpers/admin-witness.js';
import { removeRun } from './helpers/container-harness.js';
import { removeTempDirs, silentLogger, startNamedServerAt, tempDir } from './helpers/harness.js';
import { installPerRouteState } from './helpers/per-route-fixture.js';
import { getWithMarker, staticController } from './helpers/static-harness.js';

// An agent upgraded in place: the state folder and the Caddy an agent of the
// per-route config left (helpers/per-route-fixture.ts), then the static
// controller started on them. The move is one load of kind `static-move`, and
// a prober sending 20 requests a second to every route sees no failure
// through it. In container mode the Caddy container is kept (not recreated):
// the answers live in the data folder it already mounts.

const ready = (await ensureCaddy()).available && (await ensureKnot()).available;
const dockerReady = ready && (await ensureDocker()).available;
const docker = new Docker({ socketPath: DOCKER_SOCKET });
const PROBE_EVERY_MS = 50;

afterAll(removeTempDirs);

/** GETs each domain in turn every 50 ms until stopped; every answer that is not the domain's service is a failure. */
function startProber(port: number, address: string, expected: Record<string, string>) {
  const failures: string[] = [];
  let sent = 0;
  let stopped = false;
  const domains = Object.keys(expected);
  const done = (async () => {
    while (!stopped) {
      const domain = domains[sent % domains.length] as string;
      sent += 1;
      const started = Date.now();
      const res = await getWithMarker(port, domain, '/', address).catch((e: Error) => ({ status: 0, body: e.message, marker: null }));
      if (res.status !== 200 || res.body !== expected[domain]) failures.push(`${domain}: ${res.status} ${res.marker ?? ''} ${res.body.trim()}`);
      await new Promise((r) => setTimeout(r, Math.max(0, PROBE_EVERY_MS - (Date.now() - started))));
    }
  })();
  return {
    failures,
    get sent() {
      return sent;
    },
    async stop() {
      stopped = true;
      await done;
    },
  };
}

describe.skipIf(!ready)('upgrade in place from the per-route config: external mode', () => {
  it('one load (static-move), every route answers throughout: 0 failures at 20 requests a second', async () => {
    const caddy = await startCaddy();
    const witness = await startAdminWitness({ port: caddy.adminPort });
    const shop = await startNamedServerAt('127.0.0.1', 'shop');
    const blog = await startNamedServerAt('127.0.0.1', 'blog');
    const stateDir = await tempDir();
    const adminListen = `127.0.0.1:${caddy.adminPort}`;
    let controller: StaticRoutingController | undefined;
    try {
      const routes: Route[] = [
        { domain: 'shop.example.test', pathPrefix: null, serviceId: 'shop', upstream: `127.0.0.1:${shop.port}` },
        { domain: 'blog.example.test', pathPrefix: null, serviceId: 'blog', upstream: `127.0.0.1:${blog.port}` },
      ];
      await installPerRouteState({ stateDir, adminUrl: caddy.adminUrl, adminListen, httpPort: caddy.httpPort, routes });
      const prober = startProber(caddy.httpPort, '127.0.0.1', { 'shop.example.test': 'shop /', 'blog.example.test': 'blog /' });
      await new Promise((r) => setTimeout(r, 1_000));
      controller = await staticController({ adminUrl: witness.url, adminListen, stateDir, httpPort: caddy.httpPort, checkIntervalMs: 200 });
      await controller.start();
      await new Promise((r) => setTimeout(r, 2_000));
      await prober.stop();
      expect(prober.sent).toBeGreaterThanOrEqual(50);
      expect(prober.failures).toEqual([]);
      expect(witness.loads).toBe(1);
      expect(controller.status().reloadKinds).toMatchObject({ initial: 1, staticMove: 1, change: 0, repairDrift: 0 });
      // Served by the static config now: a name without a route is Caddy's own, marked answer.
      expect((await getWithMarker(caddy.httpPort, 'nothing.example.test')).marker).toBe('no-route');
    } finally {
      await controller?.stop();
      await controller?.knot.destroy();
      await Promise.all([shop.close(), blog.close(), witness.close()]);
      await caddy.stop();
    }
  });
});

describe.skipIf(!dockerReady)('upgrade in place from the per-route config: container mode', () => {
  it('the Caddy container is kept, one load (static-move), 0 failures at 20 requests a second', async () => {
    const run = `upgradetest-${process.pid}`;
    const network = `tether-${run}`;
    const which = (bin: string) => execFileSync('sh', ['-c', `command -v ${bin}`], { encoding: 'utf8' }).trim();
    await ensureNetwork(docker, network);
    const gateway = (await docker.getNetwork(network).inspect()).IPAM?.Config?.[0]?.Gateway as string;
    const shop = await startNamedServerAt(gateway, 'shop');
    const stateDir = await tempDir();
    const socketPath = path.join(stateDir, 'caddy', 'run', 'admin.sock');
    const parts = async (adminUrl?: string) =>
      createContainerRoutingController({
        docker,
        network,
        node: run,
        stateDir,
        caddyBinary: which('caddy'),
        knotd: which('knotd'),
        knotc: which('knotc'),
        bindAddress: '127.0.0.1',
        serving: { tls: 'off', httpPort, httpsPort: 443 },
        adminTimeoutMs: 5_000,
        checkIntervalMs: 200,
        answersIntervalMs: 200,
        answererProbeTimeoutMs: 300,
        lookupRefreshMs: 500,
        answererPort: 5399,
        askPort: 9082,
        issuer: 'internal',
        ...(adminUrl ? { adminUrl } : {}),
        logger: silentLogger,
        endpoints: dockerEndpoints(docker, { network, node: run }),
      });
    const httpPort = await freePort();
    let upgraded: Awaited<ReturnType<typeof parts>> | undefined;
    const witness = { current: null as Awaited<ReturnType<typeof startAdminWitness>> | null };
    try {
      // The old agent's Caddy container: the same supervisor made it (its settings never named the answers).
      const old = await parts();
      await old.container.ensure();
      const before = await old.container.running();
      const routes: Route[] = [{ domain: 'shop.example.test', pathPrefix: null, serviceId: 'shop', upstream: `${gateway}:${shop.port}` }];
      await installPerRouteState({ stateDir, adminUrl: `unix://${socketPath}`, adminListen: CADDY_CONTAINER_ADMIN.listen, adminOrigins: ['localhost'], httpPort: CADDY_CONTAINER.httpPort, routes });
      const prober = startProber(httpPort, '127.0.0.1', { 'shop.example.test': 'shop /' });
      await new Promise((r) => setTimeout(r, 1_000));

      witness.current = await startAdminWitness({ socketPath });
      upgraded = await parts(witness.current.url);
      await upgraded.controller.start();
      await new Promise((r) => setTimeout(r, 2_000));
      await prober.stop();
      expect(prober.sent).toBeGreaterThanOrEqual(50);
      expect(prober.failures).toEqual([]);
      expect(witness.current.loads).toBe(1);
      expect(upgraded.controller.status().reloadKinds).toMatchObject({ initial: 1, staticMove: 1, change: 0, repairDrift: 0 });
      expect((await upgraded.container.running())?.id).toBe(before?.id);
      expect((await getWithMarker(httpPort, 'nothing.example.test')).marker).toBe('no-route');
    } finally {
      await upgraded?.controller.stop();
      await upgraded?.answerer.destroy();
      await upgraded?.container.remove();
      await witness.current?.close();
      await shop.close();
      await removeRun(docker, run, network);
    }
  }, 120_000);
});
