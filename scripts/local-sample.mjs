// The sample service `npm start` deploys (start-local.mjs): team `local`,
// service `hello`, route `hello.localhost`. One node: one replica on node
// `local`. A fleet of several: two replicas the scheduler spreads over two of
// the nodes, every node labelled an ingress, so each node's proxy answers the
// route (from a replica of its own, or through another node's private address).
//
// Nothing can be pulled on a machine without a registry, so the sample image is
// made locally, like the test kit's: `docker import` of a folder holding Debian's
// static busybox, whose httpd serves one page on port 8080.
import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { URLSearchParams } from 'node:url';
import { dataDir, docker } from './local-common.mjs';

const SAMPLE_IMAGE = 'tether-local/hello:1';
const SAMPLE_PORT = 8080;
const SAMPLE_PAGE = '<!doctype html><title>hello</title><h1>Hello from Tether</h1><p>Deployed by your local panel on node "local".</p>\n';
// PID 1 ignores SIGTERM without a handler: trap it so the agent's `docker stop` is quick.
const SAMPLE_CMD = `httpd -f -p ${SAMPLE_PORT} -h /www & trap 'kill $!; exit 0' TERM; wait`;
export const SAMPLE_DOMAIN = 'hello.localhost';
/** Replicas of the sample on a fleet of several: enough to spread, one node left to move to. */
export const FLEET_SAMPLE_REPLICAS = 2;
const sampleFile = path.join(dataDir, 'sample-service.json');

export function box(lines) {
  console.log(['', '────────────────────────────────────────────────────────────', ...lines.map((l) => ` ${l}`), '────────────────────────────────────────────────────────────', ''].join('\n'));
}

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
export async function poll(what, timeoutMs, check) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs / 1000} s`);
    await new Promise((r) => setTimeout(r, 500));
  }
}

/** Creates `body` at `listPath`, or on a name conflict (a start interrupted before it saved its state) finds it by name. */
async function createOrFind(api, listPath, body) {
  const created = await api('POST', listPath.split('?')[0], body);
  if (created.status === 201) return created.body;
  if (created.status === 409) {
    const found = (await api('GET', listPath)).body?.find?.((x) => x.name === body.name);
    if (found) return found;
  }
  throw new Error(`POST ${listPath} answered ${created.status} ${JSON.stringify(created.body)}`);
}

/** Team `local` and service `hello` (on node `local`, or spread over the fleet), created once; their ids live in the data directory. */
async function sampleIds(api, image, single) {
  if (existsSync(sampleFile)) {
    const saved = JSON.parse(readFileSync(sampleFile, 'utf8'));
    if ((await api('GET', `/v1/services/${saved.serviceId}`)).status === 200) return saved;
  }
  const team = await createOrFind(api, '/v1/teams', { name: 'local' });
  const placement = single ? { replicas: 1, node: 'local' } : { replicas: FLEET_SAMPLE_REPLICAS };
  const service = await createOrFind(api, `/v1/services?teamId=${team.id}`, { teamId: team.id, name: 'hello', image, internalPort: SAMPLE_PORT, ...placement });
  const ids = { teamId: team.id, serviceId: service.id };
  writeFileSync(sampleFile, JSON.stringify(ids));
  return ids;
}

/**
 * Every node's session open written (its `opened` event is stored with the capabilities it agreed, in one
 * statement): before it the scheduler does not count the node, and would put both replicas on the others.
 */
async function fleetConnected(api, nodes) {
  const sessions = (await api('GET', '/v1/sessions')).body?.sessions ?? [];
  for (const node of nodes) {
    const row = sessions.find((s) => s.nodeName === node.name && s.state === 'connected');
    if (!row) return false;
    const events = (await api('GET', `/v1/nodes/${row.nodeId}/sessions?limit=5`)).body?.events ?? [];
    if (!events.some((e) => e.sessionId === row.sessionId && e.kind === 'opened')) return false;
  }
  return true;
}

/** The sample's running containers, read from Docker: node name and address, by node name. */
async function sampleContainers(serviceId) {
  const filters = encodeURIComponent(JSON.stringify({ label: [`tether.service=${serviceId}`], status: ['running'] }));
  const list = (await docker('GET', `/containers/json?filters=${filters}`)).json ?? [];
  return list
    .map((c) => ({ node: c.Labels['tether.node'], address: Object.values(c.NetworkSettings?.Networks ?? {}).find((n) => n.IPAddress)?.IPAddress ?? null }))
    .sort((a, b) => a.node.localeCompare(b.node));
}

/** Deploys the sample when it has no release on its way or running, waits for it, and prints how to reach it. */
export async function sampleService({ url, api, adminToken, nodes, network }) {
  const single = nodes.length === 1;
  const image = await sampleImage();
  // The service is made once every node counts: the scheduler places a new service's replicas at once, on the
  // nodes it sees then (a fleet's first node alone got both replicas when the service came before the others).
  if (single) {
    await poll('the local agent connecting', 30_000, async () => (await api('GET', '/v1/sessions')).body?.sessions?.some((s) => s.nodeName === 'local' && s.state === 'connected'));
  } else {
    await poll(`the ${nodes.length} local agents connecting`, 60_000, () => fleetConnected(api, nodes));
    // Every node answers the route: from its own replica, or from another node's (cross-node routing).
    for (const row of (await api('GET', '/v1/nodes')).body ?? []) {
      if (!nodes.some((n) => n.name === row.name) || row.labels?.['tether.io/ingress'] === 'true') continue;
      const res = await api('PATCH', `/v1/nodes/${row.id}`, { labels: { ...row.labels, 'tether.io/ingress': 'true' } });
      if (res.status !== 200) throw new Error(`labelling node ${row.name} an ingress failed: ${res.status} ${JSON.stringify(res.body)}`);
    }
  }
  const { serviceId } = await sampleIds(api, image, single);
  // A later start deploys nothing: the agent is sent what its node should run when it connects, and adopts what runs.
  const [latest] = (await api('GET', `/v1/services/${serviceId}/deployments?limit=1`)).body ?? [];
  let deploymentId = latest?.id;
  // pending: recorded and handed to the scheduler (an agent that speaks allocations), or waiting for the agent.
  if (!latest || !['pending', 'delivered', 'running'].includes(latest.status)) {
    const res = await api('POST', `/v1/services/${serviceId}/deployments`, {});
    // 202: delivered to the node; 201: recorded (the scheduler rolls it out through allocations).
    if (res.status !== 202 && res.status !== 201) throw new Error(`deploying it failed: ${res.status} ${JSON.stringify(res.body)}`);
    deploymentId = res.body.id;
    console.log(`deploying the sample service "hello" (deployment ${deploymentId})`);
  }
  const deployment = await poll('the sample deployment finishing', 90_000, async () => {
    const d = (await api('GET', `/v1/deployments/${deploymentId}`)).body;
    return d && !['pending', 'delivered'].includes(d.status) ? d : undefined;
  });
  if (deployment.status !== 'running') throw new Error(`deployment ${deploymentId} ended ${deployment.status}: ${deployment.reason}`);
  const status = await poll('status "running"', 30_000, async () => {
    const s = (await api('GET', `/v1/services/${serviceId}/status`)).body;
    return s?.state === 'running' ? s : undefined;
  });
  const running = await sampleContainers(serviceId);
  const direct = (c) =>
    c?.address
      ? `curl http://${c.address}:${SAMPLE_PORT}/   (its address on Docker network ${network(c.node)}, this machine only)`
      : 'it has no address on a Docker network yet; see its status';
  const where = single ? 'node local' : `${running.length} replicas on ${[...new Set(running.map((c) => c.node))].join(', ')}`;
  const lines = [`Sample service "hello" (team local, ${where}): ${status.reason}`];
  const proxied = nodes.filter((n) => n.httpPort);
  if (proxied.length > 0) {
    await sampleRoute(api, serviceId);
    const answers = await Promise.all(
      proxied.map((n) => poll(`the proxy of node ${n.name} answering for ${SAMPLE_DOMAIN}`, 30_000, () => proxyAnswers(n.httpPort)).catch((err) => err)),
    );
    if (single && answers[0] === true) {
      lines.push(`  Reach it through the proxy:  curl -H 'Host: ${SAMPLE_DOMAIN}' http://127.0.0.1:${proxied[0].httpPort}/`, `  (or open http://${SAMPLE_DOMAIN}:${proxied[0].httpPort}/ in a browser on this machine)`);
    } else if (single) {
      lines.push(`  The proxy does not answer for ${SAMPLE_DOMAIN} yet (${answers[0].message}); see the agent's log above.`, `  Directly: ${direct(running[0])}`);
    } else {
      lines.push('  Reach it through any node\'s proxy (a node without a replica forwards to one that has it):');
      proxied.forEach((n, i) =>
        lines.push(answers[i] === true ? `    ${n.name}:  curl -H 'Host: ${SAMPLE_DOMAIN}' http://127.0.0.1:${n.httpPort}/` : `    ${n.name}:  does not answer yet (${answers[i].message})`),
      );
    }
  } else {
    for (const c of single ? running.slice(0, 1) : running) lines.push(`  Reach it${single ? '' : ` on ${c.node}`}:  ${direct(c)}`);
    if (nodes[0].proxyMissing) lines.push(`  Not through a proxy: ${nodes[0].proxyMissing}.`);
  }
  lines.push(`  Status:    curl -H "Authorization: Bearer ${adminToken}" ${url}/v1/services/${serviceId}/status`);
  box(lines);
  return { serviceId, nodes: running.map((c) => c.node) };
}

/** The route hello.localhost → hello, created once. */
async function sampleRoute(api, serviceId) {
  const routes = (await api('GET', `/v1/routes?serviceId=${serviceId}`)).body ?? [];
  if (routes.some((r) => r.domain === SAMPLE_DOMAIN)) return;
  const res = await api('POST', '/v1/routes', { domain: SAMPLE_DOMAIN, serviceId });
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
