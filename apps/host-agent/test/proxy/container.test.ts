import { execFileSync } from 'node:child_process';
import path from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DOCKER_SOCKET, TEST_IMAGE, ensureCaddy, ensureDocker, freePort, waitFor } from '@tether/testkit';
import { serviceUpstream } from '@tether/protocol';
import { LABELS, ensureNetwork } from '../../src/docker/docker-client.js';
import { createContainerRoutingController, type CaddyContainer, type CaddyRoutingController } from '../../src/proxy/index.js';
import { startAdminWitness, type AdminWitness } from './helpers/admin-witness.js';
import { removeRun } from './helpers/container-harness.js';
import { httpGet, mapOf, removeTempDirs, route, silentLogger, tempDir } from './helpers/harness.js';

// Container mode with a real Docker engine: the agent builds the Caddy image
// from Debian's binary, runs it on Tether's network, and brings it back (and
// its routes) when it is killed or removed. The witness sits in front of the
// admin socket and counts the loads.

const docker = new Docker({ socketPath: DOCKER_SOCKET });
const dockerOk = (await ensureDocker()).available && (await ensureCaddy()).available;
// The image is built from whichever caddy the test kit found (Debian's under CI).
const caddyBinary = dockerOk ? execFileSync('sh', ['-c', 'command -v caddy'], { encoding: 'utf8' }).trim() : '';
const run = `proxytest-${process.pid}`;
const network = `tether-${run}`;
const testLabel = { 'tether.test': run };

describe.skipIf(!dockerOk)('container mode: a supervised Caddy container', () => {
  let witness: AdminWitness;
  let controller: CaddyRoutingController;
  let container: CaddyContainer;
  let httpPort: number;
  const domain = 'web.example.test';

  const proxyContainers = () => docker.listContainers({ all: true, filters: { label: [`${LABELS.role}=proxy`, `${LABELS.node}=${run}`] } });
  const served = async () => (await httpGet(httpPort, domain).catch(() => ({ status: 0, body: '' }))).body;

  beforeAll(async () => {
    await ensureNetwork(docker, network);
    // The service, reachable only by its stable alias on Tether's network.
    const web = await docker.createContainer({
      Image: TEST_IMAGE,
      Labels: testLabel,
      Cmd: ['sh', '-c', 'mkdir -p /www && echo hello from web > /www/index.html && exec httpd -f -p 8080 -h /www'],
      NetworkingConfig: { EndpointsConfig: { [network]: { Aliases: ['svc-web'] } } },
    });
    await web.start();

    const stateDir = await tempDir();
    witness = await startAdminWitness({ socketPath: path.join(stateDir, 'caddy', 'run', 'admin.sock') });
    httpPort = await freePort();
    ({ controller, container } = createContainerRoutingController({
      docker,
      network,
      node: run,
      stateDir,
      caddyBinary,
      bindAddress: '127.0.0.1',
      serving: { tls: 'off', httpPort, httpsPort: 443 },
      adminTimeoutMs: 5_000,
      checkIntervalMs: 250,
      logger: silentLogger,
      adminUrl: witness.url,
    }));
  });

  afterAll(async () => {
    await controller?.stop();
    await container?.remove();
    await removeRun(docker, run, network);
    await witness?.close();
    await removeTempDirs();
  });

  it('runs Caddy on the network with only the HTTP port published (loopback here), and routes to the stable alias', async () => {
    await controller.start();
    const result = await controller.apply(mapOf([route(domain, serviceUpstream('web', 8080))]));
    expect(result).toMatchObject({ reloaded: true, error: null });
    expect(witness.loads).toBe(1);
    expect(await served()).toBe('hello from web\n');

    const [info] = await proxyContainers();
    expect(info?.Labels).toMatchObject({ [LABELS.managed]: 'true', [LABELS.role]: 'proxy', [LABELS.node]: run });
    const inspect = await docker.getContainer(info!.Id).inspect();
    // The admin API is a socket in the agent's state folder, never a port another container could reach.
    expect(inspect.HostConfig.PortBindings).toEqual({ '80/tcp': [{ HostIp: '127.0.0.1', HostPort: String(httpPort) }] });
    expect(Object.keys(inspect.NetworkSettings.Networks)).toEqual([network]);
  });

  it('killed: it comes back, and the next check loads the routes again (one counted reload)', async () => {
    const [before] = await proxyContainers();
    await docker.getContainer(before!.Id).kill();
    await waitFor(async () => (await served()) === 'hello from web\n', { timeoutMs: 20_000, message: 'routes served again after kill' });
    expect(witness.loads).toBe(2);
    expect(controller.status()).toMatchObject({ reloadsTotal: 2, lastReloadReason: 'repaired: proxy was running an empty config' });
  });

  it('removed: the supervisor creates it again and the routes are repaired', async () => {
    const [before] = await proxyContainers();
    await docker.getContainer(before!.Id).remove({ force: true });
    await waitFor(async () => (await served()) === 'hello from web\n', { timeoutMs: 20_000, message: 'routes served again after removal' });
    const after = await proxyContainers();
    expect(after).toHaveLength(1);
    expect(after[0]?.Id).not.toBe(before?.Id);
    expect(witness.loads).toBe(3);
    expect(controller.status().reloadsTotal).toBe(3);
    // Quiet again: the periodic check compares and does nothing.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(witness.loads).toBe(3);
  });

  it('an agent stop leaves Caddy serving', async () => {
    await controller.stop();
    expect(await served()).toBe('hello from web\n');
  });
});

describe('container mode without a Docker engine', () => {
  it('answers a push with PROXY_CONTAINER_FAILED instead of throwing or hanging', async () => {
    const { controller } = createContainerRoutingController({
      docker: new Docker({ socketPath: path.join(await tempDir(), 'no-docker.sock') }),
      network: 'tether',
      node: 'nowhere',
      stateDir: await tempDir(),
      image: 'tether/caddy:given',
      caddyBinary: '/nonexistent/caddy',
      bindAddress: '127.0.0.1',
      serving: { tls: 'off', httpPort: 8080, httpsPort: 443 },
      adminTimeoutMs: 1_000,
      checkIntervalMs: 0,
      logger: silentLogger,
    });
    const result = await controller.apply(mapOf([route('web.example.test', 'svc-web:8080')]));
    expect(result).toMatchObject({ changed: false, reloaded: false, routing: { reloadsTotal: 0 } });
    expect(result.error).toMatch(/^PROXY_CONTAINER_FAILED: docker: .*ENOENT/);
    await controller.stop();
  });
});
