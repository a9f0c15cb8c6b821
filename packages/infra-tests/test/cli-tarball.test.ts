import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerApi, ensureDocker, ensureWebImage, freePort, removeContainersByLabel, repoRoot, spawnProcess, type ManagedProcess } from '@tether/testkit';

// The CLI as a customer gets it (issue 28): the tarball a real panel serves at
// /cli/tether-cli.tgz, installed with `npm install -g --offline` into an empty
// prefix with an empty npm cache (so nothing but the tarball can satisfy it),
// from a folder outside the workspace, then run against that panel and a real
// agent on Docker: login, status with nothing to show, services, deploy --wait.

const execFileAsync = promisify(execFile);
const docker = await ensureDocker();
const ADMIN = `tth_op_${'c'.repeat(40)}`;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

describe.skipIf(!docker.available)('the CLI tarball a panel serves, installed offline', () => {
  let dir: string;
  let panel: ManagedProcess;
  let agent: ManagedProcess | undefined;
  let url: string;
  let tether: string;
  let customerToken: string;
  const nodeName = `cli-tgz-${process.pid}`;
  const network = `tether-cli-tgz-${process.pid}`;
  /** A shell-less environment like a customer's machine: node and the system's tools, no workspace, no pnpm. */
  let env: Record<string, string>;

  const api = async (method: string, pathName: string, body?: unknown, token = ADMIN) => {
    const res = await fetch(`${url}${pathName}`, { method, headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) }, ...(body ? { body: JSON.stringify(body) } : {}) });
    return { status: res.status, body: (await res.json()) as Record<string, string> };
  };
  const cli = async (args: string[], stdin = ''): Promise<Run> => {
    return await new Promise((resolve) => {
      const child = execFile(tether, args, { cwd: dir, env, timeout: 60_000 }, (err, stdout, stderr) => resolve({ code: child.exitCode ?? (err ? 1 : 0), stdout, stderr }));
      child.stdin!.end(stdin);
    });
  };

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'tether-cli-tgz-'));
    await mkdir(path.join(dir, 'home'));
    await mkdir(path.join(dir, 'npm-cache'));
    env = { PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin`, HOME: path.join(dir, 'home'), npm_config_cache: path.join(dir, 'npm-cache'), npm_config_update_notifier: 'false' };
    panel = spawnProcess(process.execPath, [path.join(repoRoot, 'apps', 'control-panel', 'dist', 'main.js')], {
      env: { TETHER_DATA_DIR: path.join(dir, 'panel'), TETHER_PORT: String(await freePort()), TETHER_ADMIN_TOKEN: ADMIN, TETHER_LOG_LEVEL: 'warn', TETHER_HEARTBEAT_INTERVAL_MS: '300', TETHER_DEPLOYMENT_WATCH_MS: '50' },
    });
    url = (await panel.waitForOutput(/Tether control panel listening on (\S+)/, 90_000))[1]!;
    const team = await api('POST', '/v1/teams', { name: nodeName });
    customerToken = (await api('POST', `/v1/teams/${team.body.id}/tokens`, { name: 'cli' })).body.token!;
    const node = await api('POST', '/v1/nodes', { name: nodeName });
    agent = spawnProcess(process.execPath, [path.join(repoRoot, 'apps', 'host-agent', 'dist', 'main.js')], {
      env: {
        TETHER_PANEL_URL: url,
        TETHER_NODE_TOKEN: node.body.token,
        TETHER_NODE_NAME: nodeName,
        TETHER_RUNTIME: 'docker',
        TETHER_PROXY: 'none',
        TETHER_STATE_DIR: path.join(dir, 'agent'),
        TETHER_DOCKER_NETWORK: network,
        TETHER_CANARY_INTERVAL_MS: '0',
        TETHER_MIN_READY_MS: '500',
        TETHER_LOG_LEVEL: 'warn',
      },
    });
  }, 180_000);

  afterAll(async () => {
    await agent?.stop();
    await removeContainersByLabel(`tether.node=${nodeName}`).catch(() => undefined);
    await dockerApi('DELETE', `/networks/${encodeURIComponent(network)}`).catch(() => undefined);
    await panel?.stop(10_000);
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('GET /cli/tether-cli.tgz needs no token; npm installs it offline with an empty cache, and it carries no dependencies', async () => {
    const res = await fetch(`${url}/cli/tether-cli.tgz`);
    expect(res.status).toBe(200);
    const name = /filename="([^"]+)"/.exec(res.headers.get('content-disposition') ?? '')?.[1];
    expect(name).toMatch(/^tether-cli-\d+\.\d+\.\d+\.tgz$/);
    await writeFile(path.join(dir, name!), Buffer.from(await res.arrayBuffer()));
    const prefix = path.join(dir, 'prefix');
    await execFileAsync('npm', ['install', '-g', '--offline', '--no-audit', '--no-fund', '--prefix', prefix, `./${name}`], { cwd: dir, env, timeout: 120_000 });
    tether = path.join(prefix, 'bin', 'tether');
    expect(existsSync(tether)).toBe(true);
    const installed = path.join(prefix, 'lib', 'node_modules');
    expect(readdirSync(installed)).toEqual(['@tether']);
    expect(readdirSync(path.join(installed, '@tether'))).toEqual(['cli']);
    // Bundled: no node_modules of its own, and nothing landed in the (empty) cache.
    expect(existsSync(path.join(installed, '@tether', 'cli', 'node_modules'))).toBe(false);
    const help = await cli(['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('tether: deploy and watch services on a Tether panel');
  });

  it('login, then status with no services says what to do next, for a team token', async () => {
    const login = await cli(['login', url], `${customerToken}\n`);
    expect(login.stderr).toBe('');
    expect(login.code).toBe(0);
    expect(login.stdout).toContain(`Logged in to ${url} (0 services visible); token stored in ${path.join(dir, 'home', '.config', 'tether', 'credentials.json')}`);
    const status = await cli(['status']);
    expect(status.code).toBe(0);
    expect(status.stdout).toMatch(/^No services yet\. This is a team token: it sees its own team's services only, and that team has none\.$/m);
    expect(status.stdout).toContain(`curl -X POST ${url}/v1/services`);
    expect(status.stdout).toContain('tether deploy web --wait');
    // An operator token sees every team, and is told which.
    const saved = env;
    env = { ...env, TETHER_URL: url, TETHER_TOKEN: ADMIN };
    try {
      const operator = await cli(['status']);
      expect(operator.code).toBe(0);
      expect(operator.stdout).toMatch(new RegExp(`^No services yet in any team\\. This operator token sees every team: ${nodeName} \\(\\S+\\)\\.$`, 'm'));
    } finally {
      env = saved;
    }
  });

  it('services lists what the team has; deploy --wait follows it to running on the real agent', async () => {
    const image = await ensureWebImage();
    const created = await api('POST', '/v1/services', { name: 'web', image, internalPort: 8080, node: nodeName }, customerToken);
    expect(created.status).toBe(201);
    const services = await cli(['services', '--json']);
    expect(services.code).toBe(0);
    expect(JSON.parse(services.stdout)).toEqual([expect.objectContaining({ name: 'web', image, nodeName })]);
    const deploy = await cli(['deploy', 'web', '--wait']);
    expect(deploy.stderr).toBe('');
    expect(deploy.code).toBe(0);
    expect(deploy.stdout).toMatch(/^deployment \S+ running after \d+\.\ds/m);
    const status = await cli(['status']);
    expect(status.stdout).toMatch(new RegExp(`^web +running +1/1 +${nodeName} `, 'm'));
  }, 60_000);
});
