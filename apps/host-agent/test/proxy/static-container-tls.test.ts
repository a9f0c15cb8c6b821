import { execFileSync } from 'node:child_process';
import path from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCKER_SOCKET, ensureCaddy, ensureDocker, ensureKnot, freePort } from '@tether/testkit';
import type { Route } from '@tether/protocol';
import { ensureNetwork } from '../../src/docker/docker-client.js';
import { createContainerRoutingController, dockerEndpoints, type KnotContainerAnswerer, type StaticRoutingController } from '../../src/proxy/index.js';
import type { CaddyContainer } from '../../src/proxy/caddy-container.js';
import { startAdminWitness, type AdminWitness } from './helpers/admin-witness.js';
import { removeRun, startServiceContainer } from './helpers/container-harness.js';
import { mapOf, removeTempDirs, silentLogger, tempDir } from './helpers/harness.js';
import { getWithMarker, handshake, httpsGet } from './helpers/static-harness.js';

// Certificates on demand through the Caddy container with static routing
// (TETHER_PROXY=container, TETHER_PROXY_TLS=auto, internal issuer): Caddy's
// `ask` server reads the domain files through the read-only mount, so a
// routed name gets a certificate on its first handshake, an unknown or removed
// one never does, and none of it loads Caddy.

const docker = new Docker({ socketPath: DOCKER_SOCKET });
const ready = (await ensureDocker()).available && (await ensureCaddy()).available && (await ensureKnot()).available;
const which = (bin: string) => (ready ? execFileSync('sh', ['-c', `command -v ${bin}`], { encoding: 'utf8' }).trim() : '');
const run = `statictls-${process.pid}`;
const network = `tether-${run}`;

describe.skipIf(!ready)('static proxy in container mode: certificates on demand', () => {
  let witness: AdminWitness;
  let controller: StaticRoutingController;
  let container: CaddyContainer;
  let answerer: KnotContainerAnswerer;
  let httpPort: number;
  let httpsPort: number;

  const route = (domain: string): Route => ({ domain, pathPrefix: null, serviceId: 'web', upstream: 'svc-web:8080' });

  beforeAll(async () => {
    await ensureNetwork(docker, network);
    await startServiceContainer(docker, { network, run, service: 'web' });
    const stateDir = await tempDir();
    witness = await startAdminWitness({ socketPath: path.join(stateDir, 'caddy', 'run', 'admin.sock') });
    httpPort = await freePort();
    httpsPort = await freePort();
    ({ controller, container, answerer } = createContainerRoutingController({
      docker,
      network,
      node: run,
      stateDir,
      caddyBinary: which('caddy'),
      knotd: which('knotd'),
      knotc: which('knotc'),
      bindAddress: '127.0.0.1',
      serving: { tls: 'auto', httpPort, httpsPort },
      adminTimeoutMs: 5_000,
      checkIntervalMs: 0,
      answersIntervalMs: 0,
      answererProbeTimeoutMs: 300,
      lookupRefreshMs: 500,
      answererPort: 5399,
      askPort: 9082,
      issuer: 'internal',
      adminUrl: witness.url,
      logger: silentLogger,
      endpoints: dockerEndpoints(docker, { network, node: run }),
    }));
    await controller.start();
  }, 120_000);

  afterAll(async () => {
    await controller?.stop();
    await answerer?.destroy();
    await container?.remove();
    await removeRun(docker, run, network);
    await witness?.close();
    await removeTempDirs();
  }, 60_000);

  it('a routed name gets a certificate on its first handshake, an unknown or removed one none, HTTP redirects; one load', async () => {
    expect(witness.loads).toBe(1);
    expect(await controller.apply(mapOf([route('web.example.test'), route('gone.example.test')]))).toMatchObject({ reloaded: false, error: null });
    expect(await controller.apply(mapOf([route('web.example.test')]))).toMatchObject({ reloaded: false, error: null });

    const granted = await handshake(httpsPort, 'web.example.test');
    expect(granted).toMatchObject({ ok: true, names: 'DNS:web.example.test' });
    expect(await httpsGet(httpsPort, 'web.example.test')).toEqual({ status: 200, body: 'hello from web\n' });
    expect(await handshake(httpsPort, 'unknown.example.test')).toMatchObject({ ok: false });
    expect(await handshake(httpsPort, 'gone.example.test')).toMatchObject({ ok: false });
    const plain = await getWithMarker(httpPort, 'web.example.test', '/x');
    expect(plain.status).toBe(308);
    expect(witness.loads).toBe(1);
  }, 60_000);
});
