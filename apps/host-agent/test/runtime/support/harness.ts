import type Docker from 'dockerode';
import { serviceUpstreamHost, type Workload } from '@tether/protocol';
import { DOCKER_SOCKET, TEST_IMAGE, removeContainersByLabel, waitFor } from '@tether/testkit';
import { LABELS, createDockerClient } from '../../../src/docker/docker-client.js';
import type { ContainerSummary } from '../../../src/runtime/container-runtime.js';
import { DockerContainerRuntime } from '../../../src/runtime/docker-runtime.js';
import { demuxLogs } from '../../../src/docker/docker-streams.js';
import { DockerWorkloadController, type DockerWorkloadControllerOptions } from '../../../src/runtime/docker-workload-controller.js';
import type { RuntimeTiming } from '../../../src/runtime/settings.js';
import { nodeSelector } from '../../../src/runtime/workload-spec.js';
import { afterAll, afterEach, beforeAll } from 'vitest';
import { ensureRuntimeImages, type TestImages } from './images.js';

/** Short bounds so every failure path finishes in seconds. Events, not the sweep, must drive the tests. */
export const TEST_TIMING: RuntimeTiming = {
  callTimeoutMs: 10_000,
  observeTimeoutMs: 2_000,
  pullTimeoutMs: 10_000,
  startTimeoutMs: 10_000,
  minReadyMs: 300,
  readinessPollMs: 50,
  drainMs: 300,
  stopTimeoutMs: 2_000,
  sweepIntervalMs: 120_000,
  eventReconnectMinMs: 100,
  eventReconnectMaxMs: 1_000,
};

type ControllerOverrides = Partial<Omit<DockerWorkloadControllerOptions, 'timing'>> & { timing?: Partial<RuntimeTiming> };

export interface RuntimeHarness {
  node: string;
  network: string;
  docker: Docker;
  runtime: DockerContainerRuntime;
  images: TestImages;
  /** A controller for this harness's node and network; stopped by cleanup(). */
  controller(overrides?: ControllerOverrides): DockerWorkloadController;
  workload(serviceId: string, deploymentId: string, over?: Partial<Workload>): Workload;
  /** This node's service containers, straight from Docker. */
  containers(): Promise<ContainerSummary[]>;
  /** GET / on a container's address on Tether's network, from the test process. */
  httpGet(containerId: string): Promise<string>;
  /** GET / through the service alias, from a throwaway container on Tether's network (Docker's DNS). */
  viaAlias(serviceId: string): Promise<string>;
  /**
   * A container on the network requesting the alias in a loop; stop() returns
   * what it saw. `every-address` dials each address the alias resolves to
   * until one answers, as Go's dialer (and so Caddy) does; `first-address`
   * dials only the first, like a naive client.
   */
  startClient(serviceId: string, mode: 'every-address' | 'first-address'): Promise<LoopClient>;
  /** Stops every controller made so far: two controllers of one node would fight over its containers. */
  stopControllers(): Promise<void>;
  cleanup(): Promise<void>;
}

export interface LoopClient {
  /** Resolves once the client got `body` as an answer (bounded). */
  seen(body: string): Promise<void>;
  stop(): Promise<ClientReport>;
}

export interface ClientReport {
  total: number;
  /** Count per answer body ("ok-v1": 120). */
  answers: Record<string, number>;
  failures: string[];
}

const REQUEST = `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 2`;

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Containers and networks of an earlier run of this suite whose process died before its cleanup. */
async function removeLeftovers(docker: Docker, name: string): Promise<void> {
  const stale = (value: string | undefined, prefix: string) => {
    const pid = value?.startsWith(prefix) ? Number(value.slice(prefix.length)) : NaN;
    return Number.isInteger(pid) && pid !== process.pid && !alive(pid);
  };
  const labelled = (label: string) => docker.listContainers({ all: true, filters: { label: [label] } }).catch(() => []);
  const containers = [...(await labelled(LABELS.node)), ...(await labelled('tether.test'))];
  await Promise.all(
    containers
      .filter((c) => stale(c.Labels[LABELS.node], `rt-${name}-`) || stale(c.Labels['tether.test'], `rt-${name}-`))
      .map((c) => docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined)),
  );
  const networks = await docker.listNetworks({ filters: { name: [`tether-rt-${name}-`] } }).catch(() => []);
  await Promise.all(networks.filter((n) => stale(n.Name, `tether-rt-${name}-`)).map((n) => docker.getNetwork(n.Id).remove().catch(() => undefined)));
}

export async function createHarness(name: string, options: { dockerHost?: string } = {}): Promise<RuntimeHarness> {
  const images = await ensureRuntimeImages();
  const node = `rt-${name}-${process.pid}`;
  const network = `tether-rt-${name}-${process.pid}`;
  const docker = createDockerClient(options.dockerHost ?? `unix://${DOCKER_SOCKET}`);
  await removeLeftovers(docker, name);
  const runtime = new DockerContainerRuntime(docker, { callTimeoutMs: TEST_TIMING.callTimeoutMs });
  const controllers: DockerWorkloadController[] = [];
  const helperLabel = { 'tether.test': node };

  async function runHelper(script: string): Promise<string> {
    const c = await docker.createContainer({ Image: TEST_IMAGE, Cmd: ['sh', '-c', script], Labels: helperLabel, HostConfig: { NetworkMode: network } });
    try {
      await c.start();
      await c.wait();
      return demuxLogs((await c.logs({ stdout: true, stderr: true, follow: false })) as Buffer);
    } finally {
      await c.remove({ force: true });
    }
  }

  return {
    node,
    network,
    docker,
    runtime,
    images,
    controller(overrides = {}) {
      const controller = new DockerWorkloadController({
        runtime,
        node,
        network,
        ...overrides,
        timing: { ...TEST_TIMING, ...overrides.timing },
      });
      controllers.push(controller);
      return controller;
    },
    workload(serviceId, deploymentId, over = {}) {
      return { serviceId, serviceName: serviceId, deploymentId, image: images.web, env: {}, port: 8080, replicas: 1, ...over };
    },
    containers: () => runtime.list(nodeSelector(node)),
    async httpGet(containerId) {
      const info = await docker.getContainer(containerId).inspect();
      const ip = info.NetworkSettings.Networks[network]?.IPAddress;
      if (!ip) throw new Error(`${containerId} has no address on ${network}`);
      const res = await fetch(`http://${ip}:8080/`, { signal: AbortSignal.timeout(2_000) });
      return (await res.text()).trim();
    },
    async viaAlias(serviceId) {
      const out = await runHelper(`${REQUEST} ${serviceUpstreamHost(serviceId)} 8080 | tail -n 1`);
      return out.trim();
    },
    async startClient(serviceId, mode) {
      const host = serviceUpstreamHost(serviceId);
      const resolve = `nslookup ${host} 127.0.0.11 2>/dev/null | grep '^Address: ' | grep -v 127.0.0.11 | cut -d' ' -f2`;
      const targets = mode === 'every-address' ? `$(${resolve})` : host;
      // nc -w 3: a dial to an address that just went away fails after 3 s instead of hanging.
      // With every-address, a second loop watches DNS alone: the alias must never resolve to nothing, not even
      // for a moment the HTTP loop happens to spend waiting on a retransmit.
      const dnsWatch = mode === 'every-address' ? `while true; do [ -n "${targets}" ] || echo "FAIL [alias resolved to nothing]"; sleep 0.02; done & ` : '';
      const loop = [
        dnsWatch,
        'while true; do',
        `  all=${targets}; ok=""; r="no address"`,
        `  for t in $all; do r=$(${REQUEST.replace('-w 2', '-w 3')} $t 8080 2>&1 | tail -n 1); case "$r" in ok-*) ok="$r"; break;; esac; done`,
        '  read up idle < /proc/uptime',
        '  if [ -n "$ok" ]; then echo "ok $ok"; else echo "FAIL [$r] at uptime $up, tried:" $all; fi',
        'done',
      ].join('\n');
      const c = await docker.createContainer({ Image: TEST_IMAGE, Cmd: ['sh', '-c', loop], Labels: helperLabel, HostConfig: { NetworkMode: network } });
      await c.start();
      const output = async () => demuxLogs((await c.logs({ stdout: true, stderr: true, follow: false })) as Buffer);
      return {
        async seen(body) {
          await waitFor(async () => (await output()).includes(`ok ${body}\n`), { timeoutMs: 10_000, intervalMs: 100, message: `client answered ${body}` });
        },
        async stop() {
          await c.kill().catch(() => undefined);
          const text = await output();
          await c.remove({ force: true });
          const lines = text.split('\n').filter(Boolean);
          const answers: Record<string, number> = {};
          const failures: string[] = [];
          for (const line of lines) {
            if (line.startsWith('ok ')) answers[line.slice(3)] = (answers[line.slice(3)] ?? 0) + 1;
            else failures.push(line);
          }
          return { total: lines.length, answers, failures };
        },
      };
    },
    async stopControllers() {
      await Promise.all(controllers.splice(0).map((c) => c.stop()));
    },
    async cleanup() {
      await Promise.all(controllers.splice(0).map((c) => c.stop()));
      if (options.dockerHost) {
        const all = await docker.listContainers({ all: true, filters: { label: [`${LABELS.node}=${node}`] } });
        await Promise.all(all.map((c) => docker.getContainer(c.Id).remove({ force: true })));
      } else {
        await removeContainersByLabel(`${LABELS.node}=${node}`);
        await removeContainersByLabel(`tether.test=${node}`);
      }
      // Named volumes this node's services made (they outlive their containers by design).
      const volumes = await docker.listVolumes({ filters: { label: [`${LABELS.node}=${node}`] } }).catch(() => ({ Volumes: [] }));
      await Promise.all((volumes.Volumes ?? []).map((v) => docker.getVolume(v.Name).remove().catch(() => undefined)));
      await docker.getNetwork(network).remove().catch(() => undefined);
    },
  };
}

/**
 * A suite's harness, usable as a value right away: made before all tests,
 * cleaned up after all of them; with `controllersPerTest` the controllers a
 * test made are stopped after it.
 */
export function useHarness(name: string, options: { controllersPerTest?: boolean } = {}): RuntimeHarness {
  let h: RuntimeHarness | undefined;
  beforeAll(async () => {
    h = await createHarness(name);
  });
  if (options.controllersPerTest) afterEach(() => h?.stopControllers());
  afterAll(() => h?.cleanup());
  return new Proxy({} as RuntimeHarness, {
    get(_target, key) {
      if (!h) throw new Error(`harness ${name} used before its beforeAll ran`);
      return h[key as keyof RuntimeHarness];
    },
  });
}
