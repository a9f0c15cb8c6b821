import { createHash } from 'node:crypto';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { ensureIptables } from './blackhole.js';
import { exposeInNetns, netnsClient, type Exposure, type NetnsClient } from './netns-client.js';
import { execIn, mustExecIn, spawnIn, type ExecResult } from './netns.js';
import type { ManagedProcess } from './process.js';
import { ensureSecondDaemonSupport, secondDaemon, secondDaemonRoot, type SecondDaemon } from './second-daemon.js';
import { aptInstall, commandWorks, requireSystem, run, type Requirement } from './system.js';
import { sleep } from './wait.js';

// Several "hosts" for multi-host tests: each a network namespace of its own
// (optionally with its own dockerd), all joined to a hub namespace holding a
// bridge, on one /24. Every address, route and iptables rule lives in those
// namespaces; the veth pairs are created with both ends already in them, so
// nothing ever appears in the host's namespace, not even for a moment. The
// test process itself stays outside: it reaches in through Node children
// (netns-client.ts) and nsenter.

export interface Host {
  /** host-1, host-2, … */
  name: string;
  netns: string;
  /** Its address on the hub's /24, e.g. 10.213.7.11. */
  address: string;
  /** Set by startDaemons(). */
  daemon?: SecondDaemon;
}

export interface HostNetwork {
  hosts: Host[];
  /** The hub (an outside visitor's place): the bridge's namespace and its address, the /24's .1. */
  hub: { netns: string; address: string };
  /** The /24, e.g. 10.213.7.0/24. */
  subnet: string;
  /** Starts a dockerd in every host (in parallel) and copies `images` into each from the shared engine. */
  startDaemons(images: string[]): Promise<void>;
  /** http://<hub address>:<port>, reachable from every host, piped to 127.0.0.1:`localPort` of the test process. */
  exposePanel(localPort: number): Promise<string>;
  /** An HTTP/TCP client inside `where` (a host, or a namespace name such as hub.netns). */
  client(where: Host | string): Promise<NetnsClient>;
  exec(where: Host | string, command: string, args: string[]): Promise<ExecResult>;
  /** A long-running program (an agent) inside a namespace; destroy() stops it. */
  spawnIn(where: Host | string, command: string, args: string[], options?: { env?: NodeJS.ProcessEnv; cwd?: string }): ManagedProcess;
  /** Drops every packet in or out of the host's link (its containers' too): the others see silence, no RST. */
  cut(host: Host): Promise<void>;
  heal(host: Host): Promise<void>;
  /** Stops everything and deletes the namespaces (their veths and bridge go with them). Idempotent. */
  destroy(): Promise<void>;
}

const PREFIX = 'tth-';
/** tth-<tag>-<pid>-<sequence>-<host index | hub>: the pid lets a sweep find the ones of dead test processes. */
const NAME = /^tth-[a-z0-9]+-(\d+)-\d+-(?:\d+|hub)$/;
/** Inside each namespace the link is called the same: interface names are per namespace. */
const LINK = 'eth0';
const BRIDGE = 'br0';

let sequence = 0;

/** 10.<200-249>.<0-255>.0/24 from tag, pid and sequence: distinct in logs (the namespaces would keep equal ones apart anyway). */
function subnetPrefix(tag: string, seq: number): string {
  const hash = createHash('sha256').update(`${tag}/${process.pid}/${seq}`).digest();
  return `10.${200 + (hash[0]! % 50)}.${hash[1]!}`;
}

// The cut, inside the host's namespace: raw PREROUTING sees every packet that
// arrives, before conntrack and Docker's DNAT to a published port; mangle
// POSTROUTING every packet that leaves, the host's own and its containers'.
const CUT_RULES = [
  ['-t', 'raw', 'PREROUTING', '-i', LINK],
  ['-t', 'mangle', 'POSTROUTING', '-o', LINK],
].map(([flag, table, chain, ...match]) => ({ table: [flag!, table!], chain: chain!, rule: [...match, '-m', 'comment', '--comment', 'tether-cut', '-j', 'DROP'] }));

async function deleteNamespace(netns: string): Promise<void> {
  // A namespace whose processes live on would only lose its name: stop them
  // first, dockerd alone at first, so that it can still stop its containers
  // through its containerd (they live in namespaces of their own).
  const pids = async () => (await run('ip', ['netns', 'pids', netns]).catch(() => '')).split(/\s+/).filter(Boolean).map(Number);
  const isDockerd = (pid: number) => {
    try {
      return readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'dockerd';
    } catch {
      return false;
    }
  };
  for (const [signal, which] of [['SIGTERM', isDockerd], ['SIGTERM', () => true], ['SIGKILL', () => true]] as const) {
    const targets = (await pids()).filter(which);
    for (const pid of targets) {
      try {
        process.kill(pid, signal);
      } catch {
        /* already gone */
      }
    }
    for (let i = 0; i < 100 && (await pids()).some((pid) => targets.includes(pid)); i++) await sleep(100);
  }
  await run('ip', ['netns', 'del', netns]).catch(() => undefined);
}

/** Deletes the namespaces (and what runs in them) of test processes that are gone. Returns their names. */
export async function sweepStaleHostNetworks(): Promise<string[]> {
  const names = (await run('ip', ['netns', 'list'])).split('\n').map((line) => line.split(' ')[0] ?? '');
  const stale = names.filter((name) => {
    const pid = name.match(NAME)?.[1];
    return pid !== undefined && !existsSync(`/proc/${pid}`);
  });
  await Promise.all(stale.map(deleteNamespace));
  for (const name of stale) {
    // A host's daemon is named after its namespace (see startDaemons); a mount a killed daemon left keeps its folder (as in secondDaemon's destroy).
    try {
      rmSync(secondDaemonRoot(name, Number(name.match(NAME)![1])), { recursive: true, force: true, maxRetries: 3 });
    } catch (err) {
      console.warn(`could not remove the daemon folder of ${name}: ${(err as Error).message}`);
    }
  }
  return stale;
}

/**
 * `hosts` namespaces on one bridge. `tag` (a-z, 0-9, at most 8) names them in
 * `ip netns list`. Namespaces left by dead test processes are swept first.
 */
export async function createHostNetwork(options: { tag: string; hosts: number }): Promise<HostNetwork> {
  if (!/^[a-z0-9]{1,8}$/.test(options.tag)) throw new Error(`tag ${options.tag}: 1 to 8 of a-z, 0-9`);
  if (options.hosts < 1 || options.hosts > 200) throw new Error(`hosts: 1 to 200, not ${options.hosts}`);
  await sweepStaleHostNetworks();
  const seq = sequence++;
  const base = `${PREFIX}${options.tag}-${process.pid}-${seq}`;
  const prefix = subnetPrefix(options.tag, seq);
  const hub = { netns: `${base}-hub`, address: `${prefix}.1` };
  const hosts: Host[] = Array.from({ length: options.hosts }, (_, i) => ({ name: `host-${i + 1}`, netns: `${base}-${i + 1}`, address: `${prefix}.${11 + i}` }));
  const created: string[] = [];
  const children = new Set<{ stop(): Promise<void> }>();
  const cutHosts = new Set<string>();
  let destroying: Promise<void> | undefined;

  const nsOf = (where: Host | string) => (typeof where === 'string' ? where : where.netns);
  const ip = (netns: string, ...args: string[]) => run('ip', ['-n', netns, ...args]);

  const self: HostNetwork = {
    hosts,
    hub,
    subnet: `${prefix}.0/24`,
    async startDaemons(images) {
      await Promise.all(
        hosts.map(async (host) => {
          const daemon = secondDaemon(host.netns, { netns: host.netns });
          host.daemon = daemon;
          await daemon.start();
          if (images.length > 0) await daemon.loadImages(images);
        }),
      );
    },
    async exposePanel(localPort) {
      const exposure: Exposure = await exposeInNetns(hub.netns, hub.address, localPort);
      children.add({ stop: () => exposure.close() });
      return `http://${hub.address}:${exposure.port}`;
    },
    async client(where) {
      const client = await netnsClient(nsOf(where));
      children.add({ stop: () => client.close() });
      return client;
    },
    exec: (where, command, args) => execIn(nsOf(where), command, args),
    spawnIn(where, command, args, spawnOptions) {
      const proc = spawnIn(nsOf(where), command, args, spawnOptions);
      children.add({ stop: () => proc.stop() });
      return proc;
    },
    async cut(host) {
      if (cutHosts.has(host.netns)) return;
      for (const { table, chain, rule } of CUT_RULES) await mustExecIn(host.netns, 'iptables', ['-w', ...table, '-I', chain, ...rule]);
      cutHosts.add(host.netns);
    },
    async heal(host) {
      if (!cutHosts.delete(host.netns)) return;
      for (const { table, chain, rule } of CUT_RULES) await mustExecIn(host.netns, 'iptables', ['-w', ...table, '-D', chain, ...rule]);
    },
    destroy() {
      destroying ??= (async () => {
        await Promise.all([...children].map((child) => child.stop().catch(() => undefined)));
        await Promise.all(hosts.map((host) => host.daemon?.destroy()));
        await Promise.all(created.map(deleteNamespace));
      })();
      return destroying;
    },
  };

  try {
    for (const netns of [hub.netns, ...hosts.map((host) => host.netns)]) {
      await run('ip', ['netns', 'add', netns]);
      created.push(netns);
      await ip(netns, 'link', 'set', 'lo', 'up');
    }
    await ip(hub.netns, 'link', 'add', BRIDGE, 'type', 'bridge');
    await ip(hub.netns, 'addr', 'add', `${hub.address}/24`, 'dev', BRIDGE);
    await ip(hub.netns, 'link', 'set', BRIDGE, 'up');
    for (const [i, host] of hosts.entries()) {
      const port = `p${i + 1}`;
      await ip(hub.netns, 'link', 'add', port, 'type', 'veth', 'peer', 'name', LINK, 'netns', host.netns);
      await ip(hub.netns, 'link', 'set', port, 'master', BRIDGE, 'up');
      await ip(host.netns, 'addr', 'add', `${host.address}/24`, 'dev', LINK);
      await ip(host.netns, 'link', 'set', LINK, 'up');
    }
  } catch (err) {
    await self.destroy();
    throw err;
  }
  return self;
}

/** Host networks can be made here: what a second dockerd needs, plus ip netns, nsenter and iptables (all need root). */
export async function ensureHostNetworkSupport(): Promise<Requirement> {
  // Under CI (run as root) a missing root fails the suite instead of skipping it.
  const root = await requireSystem('root', { hint: 'network namespaces (ip netns add) need root', probe: async () => process.getuid?.() === 0, install: async () => undefined });
  if (!root.available) return root;
  for (const requirement of [
    () => ensureSecondDaemonSupport(),
    () => ensureIptables(),
    () => requireSystem('iproute2', { hint: 'ip netns', probe: () => commandWorks('ip', ['netns', 'list']), install: () => aptInstall(['iproute2']) }),
    () => requireSystem('nsenter', { hint: 'util-linux nsenter', probe: () => commandWorks('nsenter', ['--version']), install: () => aptInstall(['util-linux']) }),
  ]) {
    const result = await requirement();
    if (!result.available) return result;
  }
  return { available: true, reason: null };
}
