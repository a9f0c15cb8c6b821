import { execFile, execFileSync } from 'node:child_process';
import { readFileSync, readlinkSync } from 'node:fs';
import path from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureIptables, ensureSecondDaemonSupport, secondDaemon, spawnProcess, waitFor, type ManagedProcess, type SecondDaemon } from '@tether/testkit';
import type { Release } from '@tether/protocol';
import { createDockerClient, ensureNetwork } from '../../src/docker/docker-client.js';
import { ISOLATION_CHAIN, NetworkIsolation, ensureIsolation, networkFacts, type CommandRunner } from '../../src/docker/isolation.js';
import { DockerContainerRuntime } from '../../src/runtime/docker-runtime.js';
import { allocationContainerSpec } from '../../src/runtime/workload-spec.js';
import { ensureRuntimeImages } from '../runtime/support/images.js';

// The isolation rule on a real engine and a real kernel, in a private network namespace: a second dockerd
// (unshare --net) stands for a node, a veth pair links it to another namespace standing for another host on the
// private network (10.99.0.1 the node's private address, 10.99.0.2 the other host, with a route to Tether's
// subnet through the node). Without the rule that host reaches the container's own address; with it, only the
// port published on the private address.

const support = await ensureSecondDaemonSupport();
const iptables = support.available ? await ensureIptables() : support;
const NETWORK = 'tether';
const PRIVATE = '10.99.0.1';

const inNs = (pid: number, command: string, args: string[]) => execFileSync('nsenter', ['-t', String(pid), '-n', command, ...args], { encoding: 'utf8' });

/** GET from the other host: the body, or `timeout`/`refused` (curl's exit codes 28/7). */
function getFrom(pid: number, url: string): Promise<string> {
  return new Promise((resolve) => {
    execFile('nsenter', ['-t', String(pid), '-n', 'curl', '-s', '-m', '1', url], { encoding: 'utf8' }, (error, stdout) => {
      const code = (error as { code?: unknown } | null)?.code;
      resolve(code === 28 ? 'timeout' : code === 7 ? 'refused' : error ? `error ${String(code)}` : stdout.trim());
    });
  });
}

describe.skipIf(!support.available || !iptables.available)('network isolation on a real engine (private netns)', () => {
  let daemon: SecondDaemon;
  let node = 0;
  let peer: ManagedProcess;
  let run: CommandRunner;
  let containerIp = '';
  let published = '';

  beforeAll(async () => {
    const images = await ensureRuntimeImages();
    daemon = secondDaemon('iso');
    await daemon.start();
    await daemon.loadImages([images.web]);
    node = Number(readFileSync(path.join(path.dirname(daemon.socket), 'docker.pid'), 'utf8').trim());
    // iptables as the agent runs it, inside the node's namespace.
    run = (command, args) =>
      new Promise((resolve, reject) =>
        execFile('nsenter', ['-t', String(node), '-n', command, ...args], { encoding: 'utf8' }, (error, stdout, stderr) => {
          const code = (error as { code?: unknown } | null)?.code;
          if (error && typeof code !== 'number') reject(error);
          else resolve({ code: typeof code === 'number' ? code : 0, stdout, stderr });
        }),
      );
    peer = spawnProcess('unshare', ['--net', 'sleep', '600']);
    // Only once unshare has made its namespace: entering the pid before would configure the host's.
    await waitFor(() => readlinkSync(`/proc/${peer.pid}/ns/net`) !== readlinkSync('/proc/self/ns/net'), { timeoutMs: 5_000, intervalMs: 10, message: 'peer namespace' });
    inNs(node, 'ip', ['link', 'add', 'veth-node', 'type', 'veth', 'peer', 'name', 'veth-peer']);
    inNs(node, 'ip', ['link', 'set', 'veth-peer', 'netns', String(peer.pid)]);
    inNs(node, 'ip', ['addr', 'add', `${PRIVATE}/24`, 'dev', 'veth-node']);
    inNs(node, 'ip', ['link', 'set', 'veth-node', 'up']);
    inNs(peer.pid, 'ip', ['addr', 'add', '10.99.0.2/24', 'dev', 'veth-peer']);
    inNs(peer.pid, 'ip', ['link', 'set', 'veth-peer', 'up']);

    const docker = createDockerClient(daemon.dockerHost);
    await ensureNetwork(docker, NETWORK);
    const facts = await networkFacts(docker, NETWORK);
    inNs(peer.pid, 'ip', ['route', 'add', facts.subnets[0]!, 'via', PRIVATE]);
    const runtime = new DockerContainerRuntime(docker, { callTimeoutMs: 10_000 });
    const release: Release = { serviceId: 'svc_iso', serviceName: 'iso', deploymentId: 'dep_iso', image: images.web, env: { MESSAGE: 'ok-iso' }, port: 8080 };
    const id = await runtime.create(allocationContainerSpec('iso', NETWORK, release, 'alc-1', PRIVATE));
    await runtime.start(id);
    const info = await docker.getContainer(id).inspect();
    containerIp = info.NetworkSettings.Networks[NETWORK]!.IPAddress;
    published = `${PRIVATE}:${info.NetworkSettings.Ports['8080/tcp']![0]!.HostPort}`;
    await waitFor(async () => (await getFrom(peer.pid, `http://${published}/`)) === 'ok-iso', { timeoutMs: 10_000, intervalMs: 100, message: 'published port answers the other host' });
  }, 120_000);

  afterAll(async () => {
    await peer?.stop(1_000);
    await daemon?.destroy();
  });

  it('without the rule the other host reaches the container\'s own address; with it only the published port, and a second pass changes nothing', async () => {
    expect(await getFrom(peer.pid, `http://${containerIp}:8080/`)).toBe('ok-iso');

    const logger = pino({ level: 'silent' });
    const isolation = new NetworkIsolation({ docker: createDockerClient(daemon.dockerHost), network: NETWORK, run, intervalMs: 60_000, logger });
    await isolation.check();
    expect(isolation.enforced).toBe(true);
    const rules = inNs(node, 'iptables', ['-S', ISOLATION_CHAIN]).split('\n').filter((l) => l.includes('tether-isolation'));
    console.log(`isolation rule as iptables lists it: ${rules.join(' | ')}`);
    expect(rules).toHaveLength(1);
    expect(await getFrom(peer.pid, `http://${published}/`)).toBe('ok-iso');
    expect(await getFrom(peer.pid, `http://${containerIp}:8080/`)).toBe('timeout');
    // The node itself (Caddy, the agent's probes) still reaches the container's address.
    expect(inNs(node, 'curl', ['-s', '-m', '1', `http://${containerIp}:8080/`]).trim()).toBe('ok-iso');

    expect(await ensureIsolation(run, NETWORK, await networkFacts(createDockerClient(daemon.dockerHost), NETWORK))).toEqual({ inserted: [], removed: [] });
  });

  it('a flushed chain (a firewall reload, a rebuilt Docker chain) gets the rule back at the next check', async () => {
    inNs(node, 'iptables', ['-F', ISOLATION_CHAIN]);
    expect(await getFrom(peer.pid, `http://${containerIp}:8080/`)).toBe('ok-iso');
    const isolation = new NetworkIsolation({ docker: createDockerClient(daemon.dockerHost), network: NETWORK, run, intervalMs: 60_000, logger: pino({ level: 'silent' }) });
    await isolation.trigger();
    expect(await getFrom(peer.pid, `http://${containerIp}:8080/`)).toBe('timeout');
    expect(await getFrom(peer.pid, `http://${published}/`)).toBe('ok-iso');
  });
});
