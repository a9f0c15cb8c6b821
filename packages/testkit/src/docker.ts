import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, openSync, symlinkSync, copyFileSync, mkdirSync, rmSync, chmodSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { aptInstall, commandWorks, requireSystem, type Requirement } from './system.js';
import { waitFor } from './wait.js';

export const DOCKER_SOCKET = process.env.DOCKER_HOST?.startsWith('unix://')
  ? process.env.DOCKER_HOST.slice('unix://'.length)
  : '/var/run/docker.sock';

/** The small local image every Docker test uses: busybox (sh, httpd, nc, sleep …) in about 2 MB. No registry needed. */
export const TEST_IMAGE = 'tether-test/busybox:1';

const BUSYBOX_APPLETS = ['sh', 'httpd', 'nc', 'sleep', 'echo', 'cat', 'ls', 'wget', 'env', 'kill', 'true', 'false', 'mkdir', 'printf', 'test', 'date', 'hostname'];

/** One request to the Docker Engine API over its unix socket (the shared engine's unless `socketPath` names another). */
export function dockerApi(
  method: string,
  apiPath: string,
  body?: NodeJS.ReadableStream | string,
  contentType = 'application/json',
  socketPath = DOCKER_SOCKET,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, method, path: apiPath, headers: body ? { 'content-type': contentType } : {} }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(120_000, () => req.destroy(new Error(`docker ${method} ${apiPath} timed out`)));
    if (typeof body === 'string') req.end(body);
    else if (body) body.pipe(req);
    else req.end();
  });
}

export async function dockerPing(): Promise<boolean> {
  try {
    return (await dockerApi('GET', '/_ping')).status === 200;
  } catch {
    return false;
  }
}

/** Starts dockerd in the background (it outlives the test run; .ci/run stops it). */
async function startDockerd(): Promise<void> {
  const log = openSync(path.join(os.tmpdir(), 'tether-dockerd.log'), 'a');
  const child = spawn('dockerd', [], { detached: true, stdio: ['ignore', log, log] });
  child.unref();
  await waitFor(dockerPing, { timeoutMs: 60_000, intervalMs: 250, message: 'dockerd answering /_ping' });
}

let dockerRequirement: Promise<Requirement> | undefined;

/**
 * A running Docker engine and the local test image: found, or (under CI)
 * installed from Debian's docker.io and busybox-static, started and built.
 */
export function ensureDocker(): Promise<Requirement> {
  dockerRequirement ??= (async () => {
    const engine = await requireSystem('docker', {
      hint: `no engine answering on ${DOCKER_SOCKET}`,
      probe: dockerPing,
      install: async () => {
        if (!(await commandWorks('dockerd', ['--version']))) await aptInstall(['docker.io', 'iptables']);
        if (!(await dockerPing())) await startDockerd();
      },
    });
    if (!engine.available) return engine;
    const busybox = await requireSystem('busybox-static', {
      hint: 'the test image is built from Debian\'s static busybox',
      probe: async () => (await imageExists(TEST_IMAGE)) || (await hasStaticBusybox()),
      install: () => aptInstall(['busybox-static']),
    });
    if (!busybox.available) return busybox;
    await ensureTestImage();
    return engine;
  })();
  return dockerRequirement;
}

export async function imageExists(name: string): Promise<boolean> {
  return (await dockerApi('GET', `/images/${encodeURIComponent(name)}/json`)).status === 200;
}

const hasStaticBusybox = () => commandWorks('dpkg-query', ['-W', '-f=${Status}', 'busybox-static']).then((ok) => ok && existsSync('/bin/busybox'));

/**
 * Builds the local test image once per machine (`docker import` of a folder
 * holding Debian's static busybox). Safe to call from parallel workers.
 */
export async function ensureTestImage(): Promise<string> {
  if (await imageExists(TEST_IMAGE)) return TEST_IMAGE;
  // Parallel workers may both import; the result is the same image under the same tag.
  const busybox = '/bin/busybox';
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tether-image-'));
  try {
    mkdirSync(path.join(dir, 'bin'));
    mkdirSync(path.join(dir, 'tmp'));
    chmodSync(path.join(dir, 'tmp'), 0o1777);
    copyFileSync(busybox, path.join(dir, 'bin', 'busybox'));
    chmodSync(path.join(dir, 'bin', 'busybox'), 0o755);
    for (const applet of BUSYBOX_APPLETS) symlinkSync('busybox', path.join(dir, 'bin', applet));
    const tar = spawn('tar', ['-C', dir, '-c', '.'], { stdio: ['ignore', 'pipe', 'inherit'] });
    const [repo, tag] = TEST_IMAGE.split(':') as [string, string];
    const query = new URLSearchParams({ fromSrc: '-', repo, tag, changes: 'CMD ["/bin/sh"]' });
    query.append('changes', 'ENV PATH=/bin');
    const res = await dockerApi('POST', `/images/create?${query.toString()}`, tar.stdout, 'application/x-tar');
    if (res.status !== 200) throw new Error(`docker import of ${TEST_IMAGE} failed: ${res.status} ${res.body}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  if (!(await imageExists(TEST_IMAGE))) throw new Error(`${TEST_IMAGE} missing after import`);
  return TEST_IMAGE;
}

/** Removes every container carrying a label (e.g. one test's node label), running or not. */
export async function removeContainersByLabel(label: string): Promise<void> {
  const filters = encodeURIComponent(JSON.stringify({ label: [label] }));
  const res = await dockerApi('GET', `/containers/json?all=1&filters=${filters}`);
  const containers = JSON.parse(res.body) as { Id: string }[];
  await Promise.all(containers.map((c) => dockerApi('DELETE', `/containers/${c.Id}?force=1&v=1`)));
}

/**
 * Runs a throwaway container to completion (by default the test image, on
 * `network` when given) and returns its exit code and output. With a TTY the
 * logs come back as plain text, not multiplexed.
 */
export async function runContainer(options: { cmd: string[]; network?: string; image?: string; labels?: Record<string, string> }): Promise<{ exitCode: number; output: string }> {
  const spec = {
    Image: options.image ?? TEST_IMAGE,
    Cmd: options.cmd,
    Tty: true,
    Labels: { 'tether.test': 'run-container', ...options.labels },
    HostConfig: options.network ? { NetworkMode: options.network } : {},
  };
  const created = await dockerApi('POST', '/containers/create', JSON.stringify(spec));
  if (created.status !== 201) throw new Error(`creating a container failed: ${created.status} ${created.body}`);
  const { Id } = JSON.parse(created.body) as { Id: string };
  try {
    const started = await dockerApi('POST', `/containers/${Id}/start`);
    if (started.status !== 204) throw new Error(`starting a container failed: ${started.status} ${started.body}`);
    const waited = await dockerApi('POST', `/containers/${Id}/wait`);
    const { StatusCode } = JSON.parse(waited.body) as { StatusCode: number };
    const logs = await dockerApi('GET', `/containers/${Id}/logs?stdout=1&stderr=1`);
    return { exitCode: StatusCode, output: logs.body };
  } finally {
    await dockerApi('DELETE', `/containers/${Id}?force=1`);
  }
}
