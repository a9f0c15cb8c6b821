import { mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { spawnProcess, waitFor, type ManagedProcess } from '@tether/testkit';
import { createDockerClient } from '../../../src/docker/docker-client.js';

// A second, private Docker engine for the tests that stop, restart and freeze
// "the daemon": the shared engine must keep serving every other suite.
//
// It runs in its own network namespace (`unshare --net`): its docker0, bridges
// and iptables rules live there and never touch the host's. (Started in the
// host namespace with --bridge=none, dockerd deletes the host's docker0, which
// breaks the shared engine's default network.) Its own --data-root,
// --exec-root (with its own containerd), --pidfile and socket keep it apart
// from the shared engine on disk.

export interface SecondDaemon {
  dockerHost: string;
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

export function secondDaemon(name: string, sharedDockerHost: string): SecondDaemon {
  const root = `/tmp/trd-${name}-${process.pid}`;
  const socket = `${root}/docker.sock`;
  mkdirSync(root, { recursive: true });
  writeFileSync(`${root}/daemon.json`, '{}');
  let proc: ManagedProcess | undefined;
  let output = '';

  const args = [
    '--net',
    'dockerd',
    `--data-root=${root}/data`,
    `--exec-root=${root}/exec`,
    `--pidfile=${root}/docker.pid`,
    `--host=unix://${socket}`,
    `--config-file=${root}/daemon.json`,
    '--shutdown-timeout=2',
  ];

  const self: SecondDaemon = {
    dockerHost: `unix://${socket}`,
    async start() {
      proc = spawnProcess('unshare', args);
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
    async loadImages(images) {
      const shared = createDockerClient(sharedDockerHost);
      const own = createDockerClient(self.dockerHost);
      for (const image of images) {
        const tar = await shared.getImage(image).get();
        const res = await own.loadImage(tar);
        await new Promise<void>((resolve, reject) => {
          res.on('data', () => undefined);
          res.on('end', resolve);
          res.on('error', reject);
        });
      }
    },
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
