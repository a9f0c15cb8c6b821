import { execFileSync } from 'node:child_process';
import { aptInstall, commandWorks, requireSystem, type Requirement } from './system.js';

// A true half-open TCP connection: drop every packet of one loopback connection
// in both directions. Neither end sees a FIN or an RST; only deadlines notice.

const COMMENT = `tether-test-${process.pid}`;
const active = new Set<string>();

let iptablesRequirement: Promise<Requirement> | undefined;

/** iptables usable on loopback (needs root): found, or (under CI) installed from Debian. */
export function ensureIptables(): Promise<Requirement> {
  iptablesRequirement ??= requireSystem('iptables', {
    hint: 'iptables missing or not permitted (root needed)',
    probe: () => commandWorks('iptables', ['-w', '-L', 'INPUT', '-n']),
    install: () => aptInstall(['iptables']),
  });
  return iptablesRequirement;
}

function ruleArgs(direction: '--sport' | '--dport', port: number): string[] {
  return ['INPUT', '-i', 'lo', '-p', 'tcp', direction, String(port), '-m', 'comment', '--comment', COMMENT, '-j', 'DROP'];
}

function removeRules(port: number): void {
  for (const direction of ['--sport', '--dport'] as const) {
    // -D fails when the rule is already gone; that is the state we want.
    try {
      execFileSync('iptables', ['-w', '-D', ...ruleArgs(direction, port)], { stdio: 'ignore' });
    } catch {
      /* already removed */
    }
  }
}

function releaseAll(): void {
  for (const key of active) removeRules(Number(key));
  active.clear();
}

let hooked = false;
function hookProcessExit(): void {
  if (hooked) return;
  hooked = true;
  process.once('exit', releaseAll);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      releaseAll();
      process.kill(process.pid, signal);
    });
  }
}

export interface Blackhole {
  port: number;
  release(): void;
  [Symbol.dispose](): void;
}

/**
 * Drops both directions of the loopback connection whose one end uses `port`
 * (pick the client's ephemeral port so only that connection is cut). Release
 * in `finally`/`afterEach`; rules left by a crashed worker are removed on its
 * exit, and by `sweepBlackholes()` otherwise.
 */
export function blackhole(port: number): Blackhole {
  hookProcessExit();
  for (const direction of ['--sport', '--dport'] as const) {
    execFileSync('iptables', ['-w', '-I', ...ruleArgs(direction, port)], { stdio: 'ignore' });
  }
  active.add(String(port));
  const release = () => {
    if (!active.delete(String(port))) return;
    removeRules(port);
  };
  return { port, release, [Symbol.dispose]: release };
}

/** Removes every rule any test process left behind (matched by comment). */
export function sweepBlackholes(): number {
  const rules = execFileSync('iptables', ['-w', '-S', 'INPUT'], { encoding: 'utf8' })
    .split('\n')
    .filter((line) => line.includes('tether-test-'));
  for (const rule of rules) {
    const args = rule.replace(/^-A /, '-D ').match(/(?:[^\s"]+|"[^"]*")+/g) ?? [];
    try {
      execFileSync('iptables', ['-w', ...args.map((a) => a.replace(/^"|"$/g, ''))], { stdio: 'ignore' });
    } catch {
      /* raced with its owner */
    }
  }
  return rules.length;
}

export const iptablesWorks = () => commandWorks('iptables', ['-w', '-L', 'INPUT', '-n']);

/**
 * Refuses (TCP reset) every connection to `address` on loopback, e.g. 127.0.0.3: a local address where no
 * server answers, though servers listen on all addresses. Release it when done; `sweepBlackholes()` removes
 * one a crashed test left (same comment).
 */
export function refuseAddress(address: string): { release(): void } {
  const args = ['INPUT', '-i', 'lo', '-d', address, '-p', 'tcp', '-m', 'comment', '--comment', COMMENT, '-j', 'REJECT', '--reject-with', 'tcp-reset'];
  execFileSync('iptables', ['-w', '-I', ...args], { stdio: 'ignore' });
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    process.removeListener('exit', release);
    try {
      execFileSync('iptables', ['-w', '-D', ...args], { stdio: 'ignore' });
    } catch {
      /* already removed */
    }
  };
  process.once('exit', release);
  return { release };
}
