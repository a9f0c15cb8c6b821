import { execFile } from 'node:child_process';
import { spawnProcess, type ManagedProcess } from './process.js';

// Running programs inside a named network namespace (`ip netns add`).
//
// Everything enters with `nsenter --net=…`, not `ip netns exec`: the latter
// also gives the program a mount namespace of its own in which it unmounts
// /sys and mounts a fresh sysfs, which hides /sys/fs/cgroup (dockerd then
// fails: "Devices cgroup isn't mounted"). nsenter changes the network
// namespace only, as `unshare --net` does, and execs the program, so a
// ManagedProcess's pid is the program's own.

/** Where iproute2 keeps the named namespaces. */
export const NETNS_DIR = '/var/run/netns';

/** The command line that runs `command args…` in namespace `netns`. */
export function inNetns(netns: string, command: string, args: string[]): [string, string[]] {
  return ['nsenter', [`--net=${NETNS_DIR}/${netns}`, command, ...args]];
}

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs a command to its end inside `netns`; a non-zero exit is a result, not an error. */
export function execIn(netns: string, command: string, args: string[], timeoutMs = 60_000): Promise<ExecResult> {
  const [bin, argv] = inNetns(netns, command, args);
  return new Promise((resolve) => {
    execFile(bin, argv, { timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      resolve({ code, stdout, stderr: err && code === -1 ? `${stderr}${err.message}` : stderr });
    });
  });
}

/** Like `execIn`, but a non-zero exit throws (for the setup steps that must work). */
export async function mustExecIn(netns: string, command: string, args: string[]): Promise<string> {
  const result = await execIn(netns, command, args);
  if (result.code !== 0) throw new Error(`${command} ${args.join(' ')} in ${netns} failed (${result.code}): ${result.stderr.trim()}`);
  return result.stdout;
}

/** A long-running program (agent, daemon) inside `netns`, with its output captured. */
export function spawnIn(netns: string, command: string, args: string[], options: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): ManagedProcess {
  const [bin, argv] = inNetns(netns, command, args);
  return spawnProcess(bin, argv, options);
}
