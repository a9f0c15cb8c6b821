import { request } from 'node:https';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freeTcpPort } from '@tether/embedded-postgres';
import { spawnProcess, type ManagedProcess } from './process.js';
import { aptInstall, commandWorks, requireSystem, run, type Requirement } from './system.js';
import { waitFor } from './wait.js';

// A real private image registry for tests (issue 24): Debian's
// `docker-registry` (distribution 2.8) on 127.0.0.1 on a free port, with its
// own config file and storage folder, htpasswd auth (bcrypt, `htpasswd` from
// apache2-utils) and TLS from a CA made here with openssl. The test's Docker
// engine trusts that CA through /etc/docker/certs.d/<host:port>/ca.crt, which
// dockerd reads per pull (no restart).

let tools: Promise<Requirement> | undefined;

export function ensureRegistryTools(): Promise<Requirement> {
  tools ??= requireSystem('docker-registry', {
    hint: 'no docker-registry or htpasswd on PATH (Debian packages docker-registry, apache2-utils)',
    probe: async () => (await commandWorks('sh', ['-c', 'command -v docker-registry'])) && (await commandWorks('sh', ['-c', 'command -v htpasswd'])),
    install: () => aptInstall(['docker-registry', 'apache2-utils']),
  });
  return tools;
}

export interface PrivateRegistry {
  /** `127.0.0.1:<port>`: the registry host images name. */
  readonly host: string;
  readonly dir: string;
  /** Pushes a local image as `<host>/<repository>` (with a tag), logged in as `user`; the pushed tag is removed locally after. */
  push(localImage: string, repository: string, user: { username: string; password: string }): Promise<string>;
  /** Stops the registry process (its storage stays): pulls then find nothing listening. */
  stop(): Promise<void>;
  /** Starts it again on the same port and storage. */
  start(): Promise<void>;
  /** Stops it and removes its folder and the engine's trust of its CA. */
  destroy(): Promise<void>;
}

const openssl = (args: string[]) => run('openssl', args, { timeoutMs: 30_000 });

async function makeTls(dir: string): Promise<{ ca: string; cert: string; key: string }> {
  const p = (name: string) => path.join(dir, name);
  await openssl(['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=tether test registry CA', '-keyout', p('ca.key'), '-out', p('ca.crt')]);
  await openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-subj', '/CN=127.0.0.1', '-keyout', p('server.key'), '-out', p('server.csr')]);
  await writeFile(p('san.ext'), 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n');
  await openssl(['x509', '-req', '-in', p('server.csr'), '-CA', p('ca.crt'), '-CAkey', p('ca.key'), '-CAcreateserial', '-days', '2', '-extfile', p('san.ext'), '-out', p('server.crt')]);
  return { ca: p('ca.crt'), cert: p('server.crt'), key: p('server.key') };
}

/** The HTTP status of a GET over TLS trusting `ca`; null when nothing answers. */
function statusOf(url: string, ca: Buffer): Promise<number | null> {
  return new Promise((resolve) => {
    const req = request(url, { ca, timeout: 2_000 }, (res) => {
      res.resume();
      resolve(res.statusCode ?? null);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(null));
    req.end();
  });
}

/** Starts a registry whose htpasswd holds `users`. */
export async function startPrivateRegistry(users: readonly { username: string; password: string }[]): Promise<PrivateRegistry> {
  const dir = await mkdtemp(path.join(tmpdir(), 'tether-registry-'));
  const tls = await makeTls(dir);
  const htpasswd = path.join(dir, 'htpasswd');
  const lines = [];
  for (const u of users) lines.push((await run('htpasswd', ['-Bbn', u.username, u.password])).trim());
  await writeFile(htpasswd, `${lines.join('\n')}\n`);
  const port = await freeTcpPort();
  const host = `127.0.0.1:${port}`;
  const config = path.join(dir, 'config.yml');
  await writeFile(
    config,
    [
      'version: 0.1',
      'log:',
      '  level: warn',
      'storage:',
      '  filesystem:',
      `    rootdirectory: ${path.join(dir, 'data')}`,
      '  delete:',
      '    enabled: true',
      'http:',
      `  addr: ${host}`,
      '  tls:',
      `    certificate: ${tls.cert}`,
      `    key: ${tls.key}`,
      'auth:',
      '  htpasswd:',
      '    realm: tether-test',
      `    path: ${htpasswd}`,
      '',
    ].join('\n'),
  );
  const certsDir = path.join('/etc/docker/certs.d', host);
  await mkdir(certsDir, { recursive: true });
  const ca = await readFile(tls.ca);
  await writeFile(path.join(certsDir, 'ca.crt'), ca);
  const dockerConfig = path.join(dir, 'docker-cli');
  await mkdir(dockerConfig, { recursive: true });

  let proc: ManagedProcess | undefined;
  const start = async () => {
    proc = spawnProcess('docker-registry', ['serve', config]);
    // Listening: an unauthenticated /v2/ answers 401 over TLS from the CA made above.
    await waitFor(
      async () => (await statusOf(`https://${host}/v2/`, ca)) === 401,
      { timeoutMs: 15_000, message: `registry on ${host} (output: ${proc.output().slice(-500)})` },
    );
  };
  const stop = async () => {
    await proc?.stop(2_000);
    proc = undefined;
  };
  await start();
  const docker = (args: string[]) => run('docker', ['--config', dockerConfig, ...args], { timeoutMs: 120_000 });
  return {
    host,
    dir,
    async push(localImage, repository, user) {
      const target = `${host}/${repository}`;
      await run('sh', ['-c', `printf '%s' "$3" | docker --config "$1" login "$2" -u "$4" --password-stdin`, 'login', dockerConfig, host, user.password, user.username], { timeoutMs: 60_000 });
      await docker(['tag', localImage, target]);
      await docker(['push', target]);
      await docker(['rmi', target]);
      return target;
    },
    stop,
    start,
    async destroy() {
      await stop();
      await rm(certsDir, { recursive: true, force: true });
      await rm(dir, { recursive: true, force: true });
    },
  };
}
