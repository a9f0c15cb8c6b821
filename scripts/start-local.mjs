#!/usr/bin/env node
// `npm start`: the control panel on an embedded PostgreSQL kept in ./.tether,
// plus one local agent registered as node `local`. Prints the panel URL and an
// operator token. With a Docker engine, it also deploys a sample service
// (`hello`, team `local`) on the first start and says how to reach it; without
// one it says why containers cannot run. Ctrl-C stops both; `npm run reset`
// (reset-local.mjs) stops them too and removes what they made.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { URLSearchParams } from 'node:url';
import { LOCAL_NODE, dataDir, docker, dockerStatus, isOurs, readRunning, root, runningFile } from './local-common.mjs';

const previous = readRunning();
if (previous && isOurs(previous.launcher)) {
  console.error(`✖ Tether already runs from ${root} (launcher pid ${previous.launcher}): stop it with Ctrl-C where it runs, or \`npm run reset\` to stop it and start empty`);
  process.exit(1);
}
mkdirSync(dataDir, { recursive: true, mode: 0o755 });

// The children's output goes through this process (the panel's through a pipe), so they cannot tell whether a
// person reads it: the launcher decides from its own terminal and says so (docs/operations.md, "Logs").
const logFormat = process.env.TETHER_LOG_FORMAT ?? (process.stdout.isTTY ? 'pretty' : 'json');

// The launcher owns one operator token for local use, so it can print it on every start.
const adminTokenFile = path.join(dataDir, 'admin-token');
if (!process.env.TETHER_ADMIN_TOKEN && !existsSync(adminTokenFile)) {
  writeFileSync(adminTokenFile, `tth_op_${randomBytes(32).toString('base64url')}\n`, { mode: 0o600 });
}
const adminToken = process.env.TETHER_ADMIN_TOKEN ?? readFileSync(adminTokenFile, 'utf8').trim();

const children = [];
function stopAll(signal = 'SIGTERM') {
  for (const child of children) if (child.exitCode === null) child.kill(signal);
}
/** What runs now, for `npm run reset` (it stops these before it removes anything). */
function writeRunning() {
  const pids = { launcher: process.pid, children: children.map((c) => c.pid).filter(Boolean), startedAt: new Date().toISOString() };
  writeFileSync(runningFile, `${JSON.stringify(pids)}\n`);
}
process.on('exit', () => {
  try {
    if (JSON.parse(readFileSync(runningFile, 'utf8')).launcher === process.pid) rmSync(runningFile, { force: true });
  } catch {
    // Already gone (a reset removed the data directory).
  }
});
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    stopAll(signal);
    setTimeout(() => process.exit(0), 8_000).unref();
  });
}

async function api(url, method, pathName, body) {
  const res = await fetch(`${url}${pathName}`, {
    method,
    headers: { authorization: `Bearer ${adminToken}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

async function localNodeToken(url) {
  const file = path.join(dataDir, 'local-node.json');
  if (existsSync(file)) return JSON.parse(readFileSync(file, 'utf8')).token;
  const res = await api(url, 'POST', '/v1/nodes', { name: LOCAL_NODE });
  if (res.status !== 201) {
    throw new Error(
      `could not register node "${LOCAL_NODE}" (${res.status} ${JSON.stringify(res.body)}); its token is not in ${file}, ` +
        'so the database was kept from an earlier start whose data directory is gone. Run `npm run reset` (it stops what runs and ' +
        'removes the local data wherever it lives, also the embedded PostgreSQL kept under /var/lib/tether/postgres), then `npm start`',
    );
  }
  writeFileSync(file, JSON.stringify({ id: res.body.id, token: res.body.token }), { mode: 0o600 });
  return res.body.token;
}

const panelEnv = { ...process.env, TETHER_DATA_DIR: dataDir, TETHER_ADMIN_TOKEN: adminToken, TETHER_LOG_FORMAT: logFormat };
// The panel's node flags are the image's (docs/operations.md, "Node flags").
const panel = spawn(process.execPath, ['--max-semi-space-size=32', path.join(root, 'apps', 'control-panel', 'dist', 'main.js')], {
  cwd: root,
  env: panelEnv,
  stdio: ['ignore', 'pipe', 'inherit'],
});
children.push(panel);
writeRunning();
panel.on('exit', (code) => {
  stopAll();
  process.exit(code ?? 1);
});

let started = false;
let buffer = '';
panel.stdout.on('data', (chunk) => {
  process.stdout.write(chunk);
  if (started) return;
  buffer += chunk.toString();
  const match = buffer.match(/Tether control panel listening on (\S+)/);
  if (!match) return;
  started = true;
  void startAgent(match[1]).catch((err) => {
    console.error(`\n✖ local agent not started: ${err.message}`);
  });
});

/** A TCP port nobody listens on now, on 127.0.0.1. */
function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/**
 * The local proxy: the agent's Caddy container (TLS off: with automatic HTTPS,
 * Caddy would redirect a local name to 443) on two local ports chosen once and
 * kept in the data directory, so later starts find the same container. Says
 * which part is missing when it cannot run.
 */
async function localProxy(engine) {
  if (process.env.TETHER_PROXY) return { env: {}, missing: null, httpPort: null };
  if (!engine.available) return { env: { TETHER_PROXY: 'none' }, missing: `no proxy: ${engine.why}`, httpPort: null };
  const caddyBinary = process.env.TETHER_CADDY_BINARY ?? '/usr/bin/caddy';
  if (!process.env.TETHER_CADDY_IMAGE && !existsSync(caddyBinary)) {
    return { env: { TETHER_PROXY: 'none' }, missing: `no proxy: Caddy is not installed (${caddyBinary} is missing; apt-get install caddy, or set TETHER_CADDY_IMAGE to a Caddy image)`, httpPort: null };
  }
  // The proxy's answerer (docs/operations.md, "Static proxy"): Debian's knotd in a container the agent builds.
  // Without it there is no proxy at all: the agent never falls back to reloading Caddy on routing changes.
  const knot = [process.env.TETHER_PROXY_KNOTD ?? '/usr/sbin/knotd', process.env.TETHER_PROXY_KNOTC ?? '/usr/sbin/knotc'];
  if (!process.env.TETHER_ANSWERER_IMAGE && !knot.every((f) => existsSync(f))) {
    return { env: { TETHER_PROXY: 'none' }, missing: `no proxy: knot is not installed (${knot.filter((f) => !existsSync(f)).join(', ')} missing; apt-get install knot)`, httpPort: null };
  }
  const file = path.join(dataDir, 'proxy-ports.json');
  const ports = existsSync(file) ? JSON.parse(readFileSync(file, 'utf8')) : { http: await freePort(), https: await freePort() };
  writeFileSync(file, JSON.stringify(ports));
  return {
    env: {
      TETHER_PROXY: 'container',
      TETHER_PROXY_TLS: 'off',
      TETHER_PROXY_BIND_ADDRESS: '127.0.0.1',
      TETHER_PROXY_HTTP_PORT: String(ports.http),
      TETHER_PROXY_HTTPS_PORT: String(ports.https),
    },
    missing: null,
    httpPort: ports.http,
  };
}

let proxy = { env: {}, missing: null, httpPort: null };

async function startAgent(url) {
  const token = await localNodeToken(url);
  const engine = await dockerStatus();
  proxy = await localProxy(engine);
  const agentEnv = {
    ...process.env,
    TETHER_PANEL_URL: url,
    TETHER_NODE_TOKEN: token,
    TETHER_NODE_NAME: LOCAL_NODE,
    TETHER_LOG_FORMAT: logFormat,
    TETHER_STATE_DIR: path.join(dataDir, 'agent'),
    TETHER_RUNTIME: process.env.TETHER_RUNTIME ?? (engine.available ? 'docker' : 'none'),
    ...proxy.env,
  };
  const agent = spawn(process.execPath, [path.join(root, 'apps', 'host-agent', 'dist', 'main.js')], {
    cwd: root,
    env: agentEnv,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  children.push(agent);
  writeRunning();
  agent.on('exit', (code, signal) => {
    if (signal !== 'SIGTERM' && signal !== 'SIGINT') console.error(`local agent exited (${code ?? signal})`);
  });
  console.log(
    [
      '',
      '────────────────────────────────────────────────────────────',
      ` Tether control panel: ${url}`,
      ` API docs (OpenAPI):   ${url}/docs`,
      ` Operator token:       ${adminToken}`,
      ` Local agent:          node "local", runtime ${agentEnv.TETHER_RUNTIME}, proxy ${agentEnv.TETHER_PROXY ?? 'none'}${proxy.httpPort ? ` (Caddy on 127.0.0.1:${proxy.httpPort}, static routing)` : ''}`,
      ...(proxy.missing ? [` Proxy:                ${proxy.missing}`] : []),
      ` Try: curl -H "Authorization: Bearer ${adminToken}" ${url}/v1/sessions`,
      ` CLI:  echo ${adminToken} | npx tether login ${url}   then: npx tether status`,
      ' Start again from nothing: Ctrl-C, then npm run reset (add -- --volumes to drop volumes too)',
      '────────────────────────────────────────────────────────────',
      '',
    ].join('\n'),
  );
  if (agentEnv.TETHER_RUNTIME !== 'docker' || !engine.available) {
    const why = engine.available ? 'TETHER_RUNTIME=none was set' : engine.why;
    box([
      'Containers cannot run on this machine, so no sample service was deployed:',
      `  ${why}.`,
      'The panel and the agent run; deployments to node "local" end failed with RUNTIME_UNAVAILABLE.',
    ]);
    return;
  }
  await sampleService(url).catch((err) => box([`Sample service not deployed: ${err.message}`]));
}

function box(lines) {
  console.log(['', '────────────────────────────────────────────────────────────', ...lines.map((l) => ` ${l}`), '────────────────────────────────────────────────────────────', ''].join('\n'));
}

// ── Sample service ───────────────────────────────────────────────────────────
// Nothing can be pulled on a machine without a registry, so the sample image is
// made locally, like the test kit's: `docker import` of a folder holding Debian's
// static busybox, whose httpd serves one page on port 8080.

const SAMPLE_IMAGE = 'tether-local/hello:1';
const SAMPLE_PORT = 8080;
const SAMPLE_PAGE = '<!doctype html><title>hello</title><h1>Hello from Tether</h1><p>Deployed by your local panel on node "local".</p>\n';
// PID 1 ignores SIGTERM without a handler: trap it so the agent's `docker stop` is quick.
const SAMPLE_CMD = `httpd -f -p ${SAMPLE_PORT} -h /www & trap 'kill $!; exit 0' TERM; wait`;
const sampleFile = path.join(dataDir, 'sample-service.json');

const busyboxStatic = () =>
  existsSync('/bin/busybox') && spawnSync('dpkg-query', ['-W', '-f=${Status}', 'busybox-static'], { encoding: 'utf8' }).stdout?.includes('install ok installed');

/** The sample image: found on the engine, or built from busybox-static; otherwise an error saying what is missing. */
async function sampleImage() {
  if ((await docker('GET', `/images/${encodeURIComponent(SAMPLE_IMAGE)}/json`)).status === 200) return SAMPLE_IMAGE;
  if (!busyboxStatic()) {
    throw new Error(
      `the image ${SAMPLE_IMAGE} is not on this Docker engine and cannot be built: it is made from Debian's busybox-static ` +
        '(/bin/busybox), which is not installed. Install it (apt-get install busybox-static) and start again.',
    );
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tether-hello-'));
  try {
    for (const sub of ['bin', 'www', 'tmp']) mkdirSync(path.join(dir, sub));
    chmodSync(path.join(dir, 'tmp'), 0o1777);
    copyFileSync('/bin/busybox', path.join(dir, 'bin', 'busybox'));
    chmodSync(path.join(dir, 'bin', 'busybox'), 0o755);
    for (const applet of ['sh', 'httpd', 'kill', 'sleep', 'cat', 'ls', 'nc']) symlinkSync('busybox', path.join(dir, 'bin', applet));
    writeFileSync(path.join(dir, 'www', 'index.html'), SAMPLE_PAGE);
    const tar = spawn('tar', ['-C', dir, '-c', '.'], { stdio: ['ignore', 'pipe', 'inherit'] });
    const [repo, tag] = SAMPLE_IMAGE.split(':');
    const query = new URLSearchParams({ fromSrc: '-', repo, tag });
    for (const change of [`CMD ["/bin/sh", "-c", ${JSON.stringify(SAMPLE_CMD)}]`, 'ENV PATH=/bin', `EXPOSE ${SAMPLE_PORT}`]) query.append('changes', change);
    const res = await docker('POST', `/images/create?${query}`, { body: tar.stdout, contentType: 'application/x-tar', timeoutMs: 120_000 });
    if (res.status !== 200 || res.text.includes('"error"')) throw new Error(`building ${SAMPLE_IMAGE} failed: ${res.status} ${res.text.slice(0, 500)}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(`built the sample image ${SAMPLE_IMAGE} from /bin/busybox (busybox-static)`);
  return SAMPLE_IMAGE;
}

/** Polls `check` every 500 ms until it returns a value, or fails after `timeoutMs` saying what it waited for. */
async function poll(what, timeoutMs, check) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** Creates `body` at `listPath`, or on a name conflict (a start interrupted before it saved its state) finds it by name. */
async function createOrFind(url, listPath, body) {
  const created = await api(url, 'POST', listPath.split('?')[0], body);
  if (created.status === 201) return created.body;
  if (created.status === 409) {
    const found = (await api(url, 'GET', listPath)).body?.find?.((x) => x.name === body.name);
    if (found) return found;
  }
  throw new Error(`POST ${listPath} answered ${created.status} ${JSON.stringify(created.body)}`);
}

/** Team `local` and service `hello` on node `local`, created once; their ids live in the data directory. */
async function sampleIds(url, image) {
  if (existsSync(sampleFile)) {
    const saved = JSON.parse(readFileSync(sampleFile, 'utf8'));
    if ((await api(url, 'GET', `/v1/services/${saved.serviceId}`)).status === 200) return saved;
  }
  const team = await createOrFind(url, '/v1/teams', { name: 'local' });
  const service = await createOrFind(url, `/v1/services?teamId=${team.id}`, { teamId: team.id, name: 'hello', image, internalPort: SAMPLE_PORT, replicas: 1, node: 'local' });
  const ids = { teamId: team.id, serviceId: service.id };
  writeFileSync(sampleFile, JSON.stringify(ids));
  return ids;
}

async function sampleService(url) {
  const image = await sampleImage();
  const { serviceId } = await sampleIds(url, image);
  await poll('the local agent connecting', 30_000, async () => (await api(url, 'GET', '/v1/sessions')).body?.sessions?.some((s) => s.nodeName === 'local' && s.state === 'connected'));
  // A later start deploys nothing: the agent is sent what node "local" should run when it connects, and adopts what runs.
  const [latest] = (await api(url, 'GET', `/v1/services/${serviceId}/deployments?limit=1`)).body ?? [];
  let deploymentId = latest?.id;
  // pending: recorded and handed to the scheduler (an agent that speaks allocations), or waiting for the agent.
  if (!latest || !['pending', 'delivered', 'running'].includes(latest.status)) {
    const res = await api(url, 'POST', `/v1/services/${serviceId}/deployments`, {});
    // 202: delivered to the node; 201: recorded (the scheduler rolls it out through allocations).
    if (res.status !== 202 && res.status !== 201) throw new Error(`deploying it failed: ${res.status} ${JSON.stringify(res.body)}`);
    deploymentId = res.body.id;
    console.log(`deploying the sample service "hello" (deployment ${deploymentId})`);
  }
  const deployment = await poll('the sample deployment finishing', 90_000, async () => {
    const d = (await api(url, 'GET', `/v1/deployments/${deploymentId}`)).body;
    return d && !['pending', 'delivered'].includes(d.status) ? d : undefined;
  });
  if (deployment.status !== 'running') throw new Error(`deployment ${deploymentId} ended ${deployment.status}: ${deployment.reason}`);
  const status = await poll('status "running"', 30_000, async () => {
    const s = (await api(url, 'GET', `/v1/services/${serviceId}/status`)).body;
    return s?.state === 'running' ? s : undefined;
  });
  const container = await docker('GET', `/containers/${status.containers[0].containerId}/json`);
  const address = Object.values(container.json?.NetworkSettings?.Networks ?? {}).find((n) => n.IPAddress)?.IPAddress;
  const direct = address
    ? `curl http://${address}:${SAMPLE_PORT}/   (its address on Docker network ${process.env.TETHER_DOCKER_NETWORK ?? 'tether'}, this machine only)`
    : 'it has no address on a Docker network yet; see its status';
  const lines = [`Sample service "hello" (team local, node local): ${status.reason}`];
  if (proxy.httpPort) {
    await sampleRoute(url, serviceId);
    const through = await poll(`the proxy answering for ${SAMPLE_DOMAIN}`, 30_000, () => proxyAnswers(proxy.httpPort)).catch((err) => err);
    if (through === true) lines.push(`  Reach it through the proxy:  curl -H 'Host: ${SAMPLE_DOMAIN}' http://127.0.0.1:${proxy.httpPort}/`, `  (or open http://${SAMPLE_DOMAIN}:${proxy.httpPort}/ in a browser on this machine)`);
    else lines.push(`  The proxy does not answer for ${SAMPLE_DOMAIN} yet (${through.message}); see the agent's log above.`, `  Directly: ${direct}`);
  } else {
    lines.push(`  Reach it:  ${direct}`);
    if (proxy.missing) lines.push(`  Not through a proxy: ${proxy.missing}.`);
  }
  lines.push(`  Status:    curl -H "Authorization: Bearer ${adminToken}" ${url}/v1/services/${serviceId}/status`);
  box(lines);
}

const SAMPLE_DOMAIN = 'hello.localhost';

/** The route hello.localhost → hello, created once. */
async function sampleRoute(url, serviceId) {
  const routes = (await api(url, 'GET', `/v1/routes?serviceId=${serviceId}`)).body ?? [];
  if (routes.some((r) => r.domain === SAMPLE_DOMAIN)) return;
  const res = await api(url, 'POST', '/v1/routes', { domain: SAMPLE_DOMAIN, serviceId });
  if (res.status !== 201) throw new Error(`attaching ${SAMPLE_DOMAIN} failed: ${res.status} ${JSON.stringify(res.body)}`);
}

/** Whether Caddy on 127.0.0.1:port answers 200 for the sample's name. */
function proxyAnswers(port) {
  return new Promise((resolve) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', headers: { host: SAMPLE_DOMAIN }, timeout: 2_000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(false));
  });
}
