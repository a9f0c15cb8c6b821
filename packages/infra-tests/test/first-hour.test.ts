import { execFile } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { movedDataDir } from '@tether/embedded-postgres';
import { aptInstall, commandWorks, dockerApi, ensureDocker, freePort, removeContainersByLabel, requireSystem, spawnProcess, type ManagedProcess } from '@tether/testkit';
import { cloneCheckout, type Checkout } from './fixtures/checkout.js';

// A new user's first hour (issue 28), as root in a checkout under a mode-0700
// folder (as under /root), so the embedded PostgreSQL lives in
// /var/lib/tether/postgres: a start on a terminal prints readable lines and no
// JSON; deleting ./.tether (the old advice) makes the next start fail with a
// message naming `npm run reset`; the reset stops what runs, removes node
// "local"'s containers and the data where it really is; the start after it
// registers node "local" again.

const execFileAsync = promisify(execFile);
const root = await requireSystem('root', { probe: async () => process.getuid?.() === 0, install: async () => {}, hint: 'the first run as root can only be tried as root' });
const docker = await ensureDocker();
const pty = await requireSystem('script', { probe: () => commandWorks('script', ['--version']), install: () => aptInstall(['bsdutils']), hint: "util-linux's script runs the start on a pseudo-terminal" });

/** What a terminal shows, without colours and carriage returns. */
// eslint-disable-next-line no-control-regex -- the escape codes of colours are what it removes
const plain = (text: string) => text.replace(/\u001b\[[0-9;]*[A-Za-z]/g, '').replace(/\r/g, '');
const jsonLines = (text: string) =>
  plain(text)
    .split('\n')
    .filter((line) => {
      if (!line.trimStart().startsWith('{')) return false;
      try {
        JSON.parse(line);
        return true;
      } catch {
        return false;
      }
    });

const localContainers = async (): Promise<string[]> => {
  const filters = encodeURIComponent(JSON.stringify({ label: ['tether.node=local'] }));
  const res = await dockerApi('GET', `/containers/json?all=1&filters=${filters}`);
  return (JSON.parse(res.body) as Array<{ Names: string[] }>).map((c) => c.Names[0]!.replace(/^\//, ''));
};

describe.skipIf(!root.available || !docker.available || !pty.available)('the first hour: npm start on a terminal, npm run reset, npm start again', () => {
  let checkout: Checkout;
  let cluster: string;
  let env: Record<string, string>;
  const network = `tether-first-hour-${process.pid}`;
  const running: ManagedProcess[] = [];

  const start = (onTerminal: boolean) => {
    const command = 'node scripts/start-local.mjs';
    const child = onTerminal
      ? spawnProcess('script', ['-q', '-e', '-c', command, '/dev/null'], { cwd: checkout.dir, env })
      : spawnProcess(process.execPath, ['scripts/start-local.mjs'], { cwd: checkout.dir, env });
    running.push(child);
    return child;
  };
  const reset = async (...args: string[]) => {
    try {
      const { stdout, stderr } = await execFileAsync('npm', ['run', '--silent', 'reset', ...(args.length ? ['--', ...args] : [])], { cwd: checkout.dir, env, timeout: 60_000 });
      return plain(`${stdout}${stderr}`);
    } catch (err) {
      const e = err as { message: string; stdout?: string; stderr?: string };
      throw new Error(`npm run reset failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`);
    }
  };
  /** The launcher's last box, or the line that says why it did not get there. */
  const STARTED = /Sample service "hello" \(team local, node local\)|Sample service not deployed|local agent not started|^✖ .*/m;

  beforeAll(async () => {
    // Another start of node "local" on this engine would be removed by the reset: refuse to run beside one.
    expect(await localContainers(), 'containers labelled tether.node=local exist already (another npm start on this machine?)').toEqual([]);
    checkout = await cloneCheckout(['@tether/control-panel', '@tether/host-agent'], ['packages/common', 'packages/cli', 'packages/embedded-postgres', 'apps/control-panel', 'apps/host-agent'], ['scripts']);
    cluster = movedDataDir(path.join(checkout.dir, '.tether', 'postgres'));
    env = { TETHER_PORT: String(await freePort()), TETHER_DOCKER_NETWORK: network, TETHER_CANARY_INTERVAL_MS: '0' };
  }, 600_000);

  afterAll(async () => {
    for (const child of running) await child.stop(10_000);
    // The reset is the cleanup; if it failed, what it should have removed goes here (none was there before the test).
    if (checkout) await reset().catch(() => undefined);
    await removeContainersByLabel('tether.node=local').catch(() => undefined);
    if (cluster) await rm(cluster, { recursive: true, force: true });
    await dockerApi('DELETE', `/networks/${encodeURIComponent(network)}`).catch(() => undefined);
    await checkout?.remove();
  }, 120_000);

  it('on a terminal: readable log lines and no JSON line; the data is under /var/lib/tether/postgres', async () => {
    expect((await stat(checkout.parent)).mode & 0o777).toBe(0o700);
    const first = start(true);
    await first.waitForOutput(STARTED, 240_000);
    const out = plain(first.output());
    expect(out).toMatch(/Sample service "hello" \(team local, node local\): 1\/1 running/);
    if (existsSync('/usr/bin/caddy') && existsSync('/usr/sbin/knotd') && existsSync('/usr/sbin/knotc')) {
      // The local proxy runs static routing (its answerer a container beside Caddy), and the sample is reached through it.
      expect(out).toMatch(/proxy container \(Caddy on 127\.0\.0\.1:\d+, static routing\)/);
      expect(out).toContain("Reach it through the proxy:  curl -H 'Host: hello.localhost'");
    }
    expect(out).toContain(`Embedded PostgreSQL: data in ${cluster}`);
    // Both children logged, one readable line per event (pino-pretty), none of it JSON.
    expect(out).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: database ready/m);
    expect(out).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: tether agent starting/m);
    expect(jsonLines(first.output())).toEqual([]);
    expect(existsSync(path.join(cluster, 'PG_VERSION'))).toBe(true);
    expect((await localContainers()).length).toBeGreaterThanOrEqual(2);
    // Ctrl-C, as a user leaves it.
    const launcher = JSON.parse(readFileSync(path.join(checkout.dir, '.tether', 'running.json'), 'utf8')).launcher as number;
    process.kill(launcher, 'SIGINT');
    expect(await first.exited()).toBe(0);
    expect(existsSync(path.join(checkout.dir, '.tether', 'running.json'))).toBe(false);
  }, 300_000);

  it('without ./.tether but with the database kept, the start says to run `npm run reset` (and logs JSON when not on a terminal)', async () => {
    await rm(path.join(checkout.dir, '.tether'), { recursive: true, force: true });
    const second = start(false);
    await second.waitForOutput(/local agent not started: .*/, 120_000);
    const out = plain(second.output());
    expect(out).toMatch(/could not register node "local" \(409 .*a node named local already exists.*Run `npm run reset`/);
    // Not a terminal: JSON lines, as a log shipper expects.
    expect(jsonLines(second.output()).map((l) => JSON.parse(l) as { msg?: string }).some((l) => l.msg === 'database ready')).toBe(true);
  }, 180_000);

  it('npm run reset stops that start, removes node "local"\'s containers and the data where it lives, and says where', async () => {
    const second = running.at(-1)!;
    const before = await localContainers();
    const began = performance.now();
    const said = await reset();
    const tookMs = performance.now() - began;
    expect(said).toMatch(/^• stopped the running start \(pids \d+/m);
    expect(said).toContain(`• removed ${before.length} container(s) of node "local": ${before.join(', ')}`);
    expect(said).toContain(`• removed the embedded PostgreSQL's data: ${cluster}`);
    expect(said).toContain(`• removed the local data directory: ${path.join(checkout.dir, '.tether')}`);
    // The panel stopped its own PostgreSQL: the reset did not have to.
    expect(said).not.toContain('left running');
    await second.exited();
    expect(existsSync(cluster)).toBe(false);
    expect(existsSync(path.join(checkout.dir, '.tether'))).toBe(false);
    expect(await localContainers()).toEqual([]);
    // The panel's own stop (sessions closed, PostgreSQL stopped) is well inside the reset's 15 s grace.
    expect(tookMs).toBeLessThan(15_000);
  }, 120_000);

  it('the start after the reset registers node "local" again and deploys the sample', async () => {
    const third = start(false);
    await third.waitForOutput(STARTED, 240_000);
    const out = plain(third.output());
    expect(out).not.toContain('could not register');
    expect(out).toMatch(/Local agent: +node "local", runtime docker/);
    expect(out).toMatch(/Sample service "hello" \(team local, node local\): 1\/1 running/);
    if (existsSync('/usr/bin/caddy') && existsSync('/usr/sbin/knotd') && existsSync('/usr/sbin/knotc')) {
      // The local proxy runs static routing (its answerer a container beside Caddy), and the sample is reached through it.
      expect(out).toMatch(/proxy container \(Caddy on 127\.0\.0\.1:\d+, static routing\)/);
      expect(out).toContain("Reach it through the proxy:  curl -H 'Host: hello.localhost'");
    }
    expect(JSON.parse(readFileSync(path.join(checkout.dir, '.tether', 'local-node.json'), 'utf8'))).toMatchObject({ id: expect.any(String), token: expect.stringMatching(/^tth_node_/) });
    // The README's next commands, from the checkout (--no-install: never the registry's unrelated `tether`).
    const url = /Tether control panel: (\S+)/.exec(out)![1]!;
    const token = readFileSync(path.join(checkout.dir, '.tether', 'admin-token'), 'utf8').trim();
    const cliEnv = { ...env, HOME: path.join(checkout.parent, 'home'), PATH: process.env.PATH ?? '/usr/bin:/bin' };
    const npx = (args: string[], stdin = '') =>
      new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
        const child = execFile('npx', ['--no-install', 'tether', ...args], { cwd: checkout.dir, env: cliEnv, timeout: 60_000 }, (_err, stdout, stderr) => resolve({ code: child.exitCode, stdout, stderr }));
        child.stdin!.end(stdin);
      });
    expect(await npx(['login', url], `${token}\n`)).toMatchObject({ code: 0, stdout: expect.stringContaining(`Logged in to ${url} (1 services visible)`) });
    expect((await npx(['status'])).stdout).toMatch(/^hello +running +1\/1 +local /m);
    // Secrets work as installed: npm start made the panel a key (./.tether/secrets.key, owner-only).
    const api = (method: string, route: string, body?: unknown) =>
      fetch(`${url}${route}`, { method, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' }, ...(body ? { body: JSON.stringify(body) } : {}) });
    const [hello] = ((await (await api('GET', '/v1/services')).json()) as { id: string; name: string }[]).filter((x) => x.name === 'hello');
    const patched = await api('PATCH', `/v1/services/${hello!.id}`, { secrets: { GREETING: 'first-hour' } });
    expect(patched.status).toBe(200);
    expect(((await patched.json()) as { secrets: { name: string }[] }).secrets.map((x) => x.name)).toEqual(['GREETING']);
    expect(statSync(path.join(checkout.dir, '.tether', 'secrets.key')).mode & 0o777).toBe(0o600);
    const deploy = await npx(['deploy', 'hello', '--wait']);
    expect(deploy.stderr).toBe('');
    expect(deploy).toMatchObject({ code: 0, stdout: expect.stringMatching(/^deployment \S+ running after \d+\.\ds/m) });
    // A volume of node "local" (what a service's volume will be): kept by a reset, removed with --volumes.
    const volume = `tether-first-hour-${process.pid}`;
    const made = await dockerApi('POST', '/volumes/create', JSON.stringify({ Name: volume, Labels: { 'tether.node': 'local', 'tether.test': '1' } }));
    expect(made.status).toBe(201);
    const said = await reset();
    expect(said).toMatch(/^• stopped the running start/m);
    expect(said).toContain(`• kept 1 volume(s) of node "local": ${volume} (npm run reset -- --volumes removes them)`);
    await third.exited();
    expect((await dockerApi('GET', `/volumes/${volume}`)).status).toBe(200);
    expect(await reset('--volumes')).toContain(`• removed 1 volume(s) of node "local": ${volume}`);
    expect((await dockerApi('GET', `/volumes/${volume}`)).status).toBe(404);
  }, 300_000);
});
