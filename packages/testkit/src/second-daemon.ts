import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { DOCKER_SOCKET, dockerApi, ensureDocker } from './docker.js';
import { inNetns } from './netns.js';
import { spawnProcess, type ManagedProcess } from './process.js';
import { recordSkip, type Requirement } from './system.js';
import { waitFor } from './wait.js';

// A second, private Docker engine for the tests that stop, restart and freeze
// "the daemon": the shared engine must keep serving every other suite.
//
// It runs in its own network namespace (`unshare --net`): its docker0, bridges
// and iptables rules live there and never touch the host's. (Started in the
// host namespace with --bridge=none, dockerd deletes the host's docker0, which
// breaks the shared engine's default network.) Its own --data-root,
// --exec-root (with its own containerd), --pidfile and socket keep it apart
// from the shared engine on disk. Starting it takes root.
//
// With `netns` it runs in that named namespace instead (one "host" of
// createHostNetwork): docker0, the NAT rules of published ports and
// ip_forward are per namespace, so every host can have its own.

export interface SecondDaemon {
  dockerHost: string;
  /** Path of its unix socket (for dockerApi's socketPath). */
  socket: string;
  start(): Promise<void>;
  /** Graceful stop, as `systemctl stop docker` does: containers are stopped, the socket goes away. */
  stop(): Promise<void>;
  /** SIGSTOP, resolved once every thread of dockerd has stopped. */
  freeze(): Promise<void>;
  thaw(): void;
  /** Copies images from the shared engine (nothing can be pulled). */
  loadImages(images: string[]): Promise<void>;
  destroy(): Promise<void>;
  log(): string;
}

/** The scheduler state (R, S, T, …) of every thread of a process. */
function threadStates(pid: number): string[] {
  return readdirSync(`/proc/${pid}/task`).map((tid) => readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8').replace(/^.*\) /s, '')[0] ?? '?');
}

function ping(socketPath: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.request({ socketPath, path: '/_ping', timeout: 1_000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => req.destroy());
    req.end();
  });
}

/** `docker save` from one engine streamed into `docker load` of another. */
function copyImages(images: string[], from: string, to: string): Promise<void> {
  const query = new URLSearchParams();
  for (const image of images) query.append('names', image);
  return new Promise((resolve, reject) => {
    const save = http.request({ socketPath: from, path: `/images/get?${query.toString()}` }, (tar) => {
      if (tar.statusCode !== 200) {
        tar.resume();
        reject(new Error(`saving ${images.join(', ')} failed: ${tar.statusCode}`));
        return;
      }
      dockerApi('POST', '/images/load?quiet=1', tar, 'application/x-tar', to).then((res) => {
        // The engine answers 200 and reports a failed load inside the stream.
        if (res.status === 200 && !res.body.includes('"error"')) resolve();
        else reject(new Error(`loading ${images.join(', ')} failed: ${res.status} ${res.body}`));
      }, reject);
    });
    save.on('error', reject);
    save.end();
  });
}

/** The folder of a second daemon (data, exec root, socket) started by test process `pid`. */
export const secondDaemonRoot = (name: string, pid = process.pid) => `/tmp/trd-${name}-${pid}`;

export function secondDaemon(name: string, options: { netns?: string } = {}): SecondDaemon {
  const root = secondDaemonRoot(name);
  const socket = `${root}/docker.sock`;
  mkdirSync(root, { recursive: true });
  writeFileSync(`${root}/daemon.json`, '{}');
  let proc: ManagedProcess | undefined;
  let output = '';

  const dockerd = [
    `--data-root=${root}/data`,
    `--exec-root=${root}/exec`,
    `--pidfile=${root}/docker.pid`,
    `--host=unix://${socket}`,
    `--config-file=${root}/daemon.json`,
    '--shutdown-timeout=2',
  ];
  const [command, args] = options.netns ? inNetns(options.netns, 'dockerd', dockerd) : ['unshare', ['--net', 'dockerd', ...dockerd]];

  const self: SecondDaemon = {
    dockerHost: `unix://${socket}`,
    socket,
    async start() {
      proc = spawnProcess(command, args);
      await waitFor(() => ping(socket), { timeoutMs: 30_000, intervalMs: 100, message: `second dockerd on ${socket}` }).catch((err: Error) => {
        throw new Error(`${err.message}\n${proc?.output().slice(-3000)}`);
      });
    },
    async stop() {
      if (!proc) return;
      const current = proc;
      proc = undefined;
      await current.stop(20_000);
      output += current.output();
    },
    async freeze() {
      if (!proc) return;
      const pid = proc.pid;
      process.kill(pid, 'SIGSTOP');
      // kill() returns before every thread has stopped; a Go thread already running can still answer a request.
      await waitFor(() => threadStates(pid).every((state) => state === 'T' || state === 't'), { timeoutMs: 5_000, intervalMs: 5, message: `dockerd ${pid} stopped` });
    },
    thaw() {
      if (proc) process.kill(proc.pid, 'SIGCONT');
    },
    loadImages: (images) => copyImages(images, DOCKER_SOCKET, socket),
    async destroy() {
      if (proc) {
        self.thaw();
        await self.stop();
      }
      try {
        rmSync(root, { recursive: true, force: true, maxRetries: 3 });
      } catch (err) {
        // A mount left behind by a killed daemon; /tmp is cleaned by the machine, not worth failing a suite over.
        console.warn(`could not remove ${root}: ${(err as Error).message}`);
      }
    },
    log: () => output + (proc?.output() ?? ''),
  };
  return self;
}

/** A second dockerd can run here: the shared engine (its images are copied from there) and root (unshare, dockerd). */
export async function ensureSecondDaemonSupport(): Promise<Requirement> {
  const engine = await ensureDocker();
  if (!engine.available) return engine;
  if (process.getuid?.() === 0) return engine;
  const reason = 'a second dockerd (unshare --net dockerd) needs root';
  recordSkip('root', reason);
  return { available: false, reason };
}
