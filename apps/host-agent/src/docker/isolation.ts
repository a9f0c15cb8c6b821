import { execFile } from 'node:child_process';
import type Docker from 'dockerode';
import { CodedError, createLoop, errorMessage, sanitizeText, type Logger, type Loop } from '@tether/common';
import { AGENT_OWN_ERROR_CODES as AGENT_ERROR_CODES } from '../own-errors.js';
import { ensureNetwork } from './docker-client.js';

// "Private by construction" (DESIGN, services across nodes): with cross-node
// routing an allocation's port is published on the node's private address, and
// Docker then also forwards whatever another host sends straight to the
// container's own address on Tether's network (measured on Docker 20.10: a peer
// with a route to the subnet reached the published port and every other port
// at the container's address alike). One rule in Docker's DOCKER-USER chain
// drops a forwarded packet whose original destination (before Docker's DNAT)
// was in Tether's subnet and which did not come from Tether's bridge: a
// published port (DNAT'd from the private address) still passes, containers
// still talk to each other, and the host's own traffic (OUTPUT, not FORWARD)
// is untouched. Kept in place every check interval and whenever Docker's event
// stream reopens (a restarted dockerd or a firewall reload can flush it).

/** Runs one command; resolves with its exit code (a missing binary rejects). */
export type CommandRunner = (command: string, args: readonly string[]) => Promise<{ code: number; stdout: string; stderr: string }>;

export const ISOLATION_CHAIN = 'DOCKER-USER';

/** What the rule needs to know of Tether's Docker network. */
export interface NetworkFacts {
  /** The Linux bridge of the network (`br-<id12>` unless the network names its own). */
  bridge: string;
  /** Its subnets (CIDR), IPv4 and IPv6. */
  subnets: string[];
}

/** Marks this agent's rule for `network`: several networks (agents, tests) share one host's chain. */
export const isolationComment = (network: string) => `tether-isolation:${network}`;

const binaryFor = (subnet: string) => (subnet.includes(':') ? 'ip6tables' : 'iptables');

/** The rule for one subnet, as `iptables -I DOCKER-USER …` takes it after the chain. */
export function isolationRule(network: string, bridge: string, subnet: string): string[] {
  return ['-m', 'conntrack', '--ctorigdst', subnet, '!', '-i', bridge, '-m', 'comment', '--comment', isolationComment(network), '-j', 'DROP'];
}

export class IsolationError extends CodedError<typeof AGENT_ERROR_CODES.ISOLATION_NOT_ENFORCED> {
  constructor(message: string, options?: { cause?: unknown }) {
    super(AGENT_ERROR_CODES.ISOLATION_NOT_ENFORCED, message, options);
  }
}

async function runChecked(run: CommandRunner, command: string, args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    return await run(command, args);
  } catch (error) {
    throw new IsolationError(`${command} could not be run: ${errorMessage(error)}`, { cause: error });
  }
}

/** The `-D` arguments of a `-S` line this agent wrote (its tokens carry no spaces, only the comment is quoted). */
function deleteArgs(line: string): string[] {
  return line.trim().split(/\s+/).map((t) => t.replace(/^"|"$/g, '')).map((t, i) => (i === 0 ? '-D' : t));
}

/**
 * Makes DOCKER-USER hold exactly one rule per subnet of `network` (inserted first when missing, checked with `-C`
 * otherwise) and none of this network's older rules (a recreated network's subnet or bridge). Throws an
 * IsolationError when iptables is missing, refuses, or the chain is not there (Docker not running its firewall).
 */
export async function ensureIsolation(run: CommandRunner, network: string, facts: NetworkFacts): Promise<{ inserted: string[][]; removed: string[][] }> {
  const inserted: string[][] = [];
  const removed: string[][] = [];
  for (const binary of ['iptables', 'ip6tables'] as const) {
    const subnets = facts.subnets.filter((s) => binaryFor(s) === binary);
    if (subnets.length === 0) continue;
    const listed = await runChecked(run, binary, ['-w', '-S', ISOLATION_CHAIN]);
    if (listed.code !== 0) {
      throw new IsolationError(`${binary} -S ${ISOLATION_CHAIN} failed (exit ${listed.code}): ${listed.stderr.trim() || 'no output'}`);
    }
    const wanted = subnets.map((subnet) => isolationRule(network, facts.bridge, subnet));
    for (const rule of wanted) {
      if ((await runChecked(run, binary, ['-w', '-C', ISOLATION_CHAIN, ...rule])).code === 0) continue;
      const done = await runChecked(run, binary, ['-w', '-I', ISOLATION_CHAIN, ...rule]);
      if (done.code !== 0) throw new IsolationError(`${binary} -I ${ISOLATION_CHAIN} failed (exit ${done.code}): ${done.stderr.trim() || 'no output'}`);
      inserted.push([binary, ...rule]);
    }
    const keep = new Set(subnets.map((subnet) => `${subnet} ${facts.bridge}`));
    for (const line of listed.stdout.split('\n').filter((l) => l.includes(`"${isolationComment(network)}"`) || l.endsWith(` ${isolationComment(network)} -j DROP`))) {
      const args = deleteArgs(line);
      const subnet = args[args.indexOf('--ctorigdst') + 1];
      const bridge = args[args.indexOf('-i') + 1];
      if (keep.has(`${subnet} ${bridge}`)) continue;
      await runChecked(run, binary, ['-w', ...args]);
      removed.push([binary, ...args]);
    }
  }
  return { inserted, removed };
}

/** Tether's network as the rule needs it (created first when missing, as the runtime would). */
export async function networkFacts(docker: Docker, network: string): Promise<NetworkFacts> {
  await ensureNetwork(docker, network);
  const info = (await docker.getNetwork(network).inspect()) as { Id: string; Options?: Record<string, string>; IPAM?: { Config?: { Subnet?: string }[] } };
  const subnets = (info.IPAM?.Config ?? []).flatMap((c) => (c.Subnet ? [c.Subnet] : []));
  return { bridge: info.Options?.['com.docker.network.bridge.name'] ?? `br-${info.Id.slice(0, 12)}`, subnets };
}

/** The host's commands, each bounded by `timeoutMs`. */
export function hostCommands(timeoutMs: number): CommandRunner {
  return (command, args) =>
    new Promise((resolve, reject) => {
      execFile(command, [...args], { timeout: timeoutMs }, (error, stdout, stderr) => {
        const code = (error as (Error & { code?: unknown }) | null)?.code;
        if (error && typeof code !== 'number') reject(error);
        else resolve({ code: typeof code === 'number' ? code : 0, stdout, stderr });
      });
    });
}

/** For an engine on another machine (DOCKER_HOST=tcp://…): this host's iptables would guard the wrong kernel. */
export function elsewhere(dockerHost: string): CommandRunner {
  return () => Promise.reject(new Error(`the Docker engine is on another machine (DOCKER_HOST=${dockerHost}); its firewall is not this host's`));
}

export interface NetworkIsolationOptions {
  docker: Docker;
  network: string;
  run: CommandRunner;
  /** How often the rule is checked (TETHER_RUNTIME_SWEEP_MS). */
  intervalMs: number;
  logger: Logger;
}

/** Keeps the rule in place; a failure is logged once (ISOLATION_NOT_ENFORCED) until it changes or heals. */
export class NetworkIsolation {
  private readonly loop: Loop;
  private problem: string | null = null;
  /** The rule was in place at the last check. */
  enforced = false;

  constructor(private readonly options: NetworkIsolationOptions) {
    this.loop = createLoop({ name: 'network-isolation', intervalMs: options.intervalMs, runImmediately: true, run: () => this.check() });
  }

  start(): void {
    this.loop.start();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** Checks now (Docker's event stream reopened: a restarted daemon may have rebuilt its chains). */
  trigger(): Promise<void> {
    return this.loop.trigger();
  }

  async check(): Promise<void> {
    const { docker, network, run, logger } = this.options;
    let facts: NetworkFacts;
    try {
      facts = await networkFacts(docker, network);
    } catch (error) {
      // Docker away: the runtime reports that; the rule is checked again once it answers.
      logger.debug({ err: error }, 'network isolation: Tether\'s network could not be read; checking again later');
      return;
    }
    try {
      const { inserted, removed } = await ensureIsolation(run, network, facts);
      for (const rule of inserted) logger.info({ rule: `${rule[0]} -I ${ISOLATION_CHAIN} ${rule.slice(1).join(' ')}` }, 'network isolation: rule inserted');
      for (const rule of removed) logger.info({ rule: rule.join(' ') }, 'network isolation: stale rule removed');
      if (this.problem !== null) logger.info({ network }, 'network isolation enforced again');
      this.problem = null;
      this.enforced = true;
    } catch (error) {
      this.enforced = false;
      const message = sanitizeText(errorMessage(error), { maxLength: 1_000 });
      if (message === this.problem) return;
      this.problem = message;
      logger.error(
        { code: AGENT_ERROR_CODES.ISOLATION_NOT_ENFORCED, network, err: error },
        'network isolation not enforced: other hosts on the private network may reach containers\' own addresses on Tether\'s network (needs root and iptables in the host\'s network namespace)',
      );
    }
  }
}
