#!/usr/bin/env node
// `npm start [-- --nodes N]`: the control panel on an embedded PostgreSQL kept
// in ./.tether, plus one local agent registered as node `local` (or, with
// --nodes N, N agents `local-1` … `local-N`, each with its own proxy ports,
// state and Docker network, on this machine's one Docker engine). Prints the
// panel URL and an operator token. With a Docker engine, it also deploys a
// sample service (`hello`, team `local`; spread over two nodes of a fleet) on
// the first start and says how to reach it; without one it says why
// containers cannot run. Ctrl-C stops them all; `npm run reset`
// (reset-local.mjs) stops them too and removes what they made; `npm run node
// -- stop|start NAME` (local-node.mjs) stops or starts one agent of a fleet.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fleetPrivateAddress, localProxy, nodeToken, proxyMissing, startRequestFile } from './local-agents.mjs';
import { dataDir, dockerStatus, isOurs, readRunning, root, runningFile } from './local-common.mjs';
import { LOCAL_RESCHEDULE_AFTER_MS, UsageError, baseNetwork, chooseFleetSize, localNodes, parseStartArgs, recordFleetSize } from './local-fleet.mjs';
import { box, sampleService } from './local-sample.mjs';

let fleetSize;
try {
  fleetSize = chooseFleetSize(parseStartArgs(process.argv.slice(2)).nodes);
} catch (err) {
  if (!(err instanceof UsageError)) throw err;
  console.error(`✖ ${err.message}`);
  process.exit(2);
}
const single = fleetSize === 1;
const nodes = localNodes(fleetSize);

const previous = readRunning();
if (previous && isOurs(previous.launcher)) {
  console.error(`✖ Tether already runs from ${root} (launcher pid ${previous.launcher}): stop it with Ctrl-C where it runs, or \`npm run reset\` to stop it and start empty`);
  process.exit(1);
}
mkdirSync(dataDir, { recursive: true, mode: 0o755 });
recordFleetSize(fleetSize);

// The children's output goes through this process (the panel's through a pipe), so they cannot tell whether a
// person reads it: the launcher decides from its own terminal and says so (docs/operations.md, "Logs").
const logFormat = process.env.TETHER_LOG_FORMAT ?? (process.stdout.isTTY ? 'pretty' : 'json');

// The launcher owns one operator token for local use, so it can print it on every start.
const adminTokenFile = path.join(dataDir, 'admin-token');
if (!process.env.TETHER_ADMIN_TOKEN && !existsSync(adminTokenFile)) {
  writeFileSync(adminTokenFile, `tth_op_${randomBytes(32).toString('base64url')}\n`, { mode: 0o600 });
}
const adminToken = process.env.TETHER_ADMIN_TOKEN ?? readFileSync(adminTokenFile, 'utf8').trim();

// And one secrets key (docs/operations.md, "Secrets key"), so service secrets, registry passwords and shared
// certificates work locally as installed; `npm run reset` removes it with the data it encrypts.
const secretsKeyFile = path.join(dataDir, 'secrets.key');
const ownSecretsKey = !process.env.TETHER_SECRETS_KEY && !process.env.TETHER_SECRETS_KEY_FILE;
if (ownSecretsKey && !existsSync(secretsKeyFile)) writeFileSync(secretsKeyFile, `${randomBytes(32).toString('base64')}\n`, { mode: 0o600 });

const children = [];
/** The agent process of each node while it runs, and how to start it again. */
const agents = new Map();
let stopping = false;
function stopAll(signal = 'SIGTERM') {
  stopping = true;
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill(signal);
}
/** What runs now, for `npm run reset` (it stops these before it removes anything) and `npm run node`. */
function writeRunning() {
  const live = children.filter((c) => c.exitCode === null && c.signalCode === null);
  const agentPids = Object.fromEntries([...agents].map(([name, a]) => [name, a.child && a.child.exitCode === null && a.child.signalCode === null ? a.child.pid : null]));
  const pids = { launcher: process.pid, children: live.map((c) => c.pid).filter(Boolean), ...(single ? {} : { agents: agentPids }), startedAt: new Date().toISOString() };
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

let panelUrl = '';
async function api(method, pathName, body) {
  const res = await fetch(`${panelUrl}${pathName}`, {
    method,
    headers: { authorization: `Bearer ${adminToken}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

// A fleet's stopped agent is replaced after a grace short enough to watch (the panel's default is 60 s).
const rescheduleAfterMs = Number(process.env.TETHER_RESCHEDULE_AFTER_MS ?? (single ? 60_000 : LOCAL_RESCHEDULE_AFTER_MS));
const panelEnv = {
  ...process.env,
  TETHER_DATA_DIR: dataDir,
  TETHER_ADMIN_TOKEN: adminToken,
  ...(ownSecretsKey ? { TETHER_SECRETS_KEY_FILE: secretsKeyFile } : {}),
  TETHER_LOG_FORMAT: logFormat,
  ...(single ? {} : { TETHER_RESCHEDULE_AFTER_MS: String(rescheduleAfterMs) }),
};
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
  panelUrl = match[1];
  void startAgents().catch((err) => {
    console.error(`\n✖ ${single ? 'local agent' : 'local agents'} not started: ${err.message}`);
  });
});

function spawnAgent(name) {
  const agent = agents.get(name);
  const child = spawn(process.execPath, [path.join(root, 'apps', 'host-agent', 'dist', 'main.js')], { cwd: root, env: agent.env, stdio: ['ignore', 'inherit', 'inherit'] });
  agent.child = child;
  children.push(child);
  writeRunning();
  child.on('exit', (code, signal) => {
    writeRunning();
    if (single) {
      if (signal !== 'SIGTERM' && signal !== 'SIGINT') console.error(`local agent exited (${code ?? signal})`);
    } else if (!stopping) {
      box([
        `The agent of node ${name} stopped (pid ${child.pid}, ${signal ?? `exit code ${code}`}). Its containers keep running, unproved.`,
        `After ${rescheduleAfterMs / 1000} s without it, the scheduler starts its replicas on another node.`,
        `Start it again: npm run node -- start ${name}   (its old copies are then stopped: the replacement wins)`,
      ]);
    }
  });
}

// `npm run node -- start NAME` (local-node.mjs): start that agent again when it is not running.
process.on('SIGUSR2', () => {
  let name = '';
  try {
    name = readFileSync(startRequestFile, 'utf8').trim();
    rmSync(startRequestFile, { force: true });
  } catch {
    return;
  }
  const agent = agents.get(name);
  if (!agent || stopping || (agent.child && agent.child.exitCode === null && agent.child.signalCode === null)) return;
  spawnAgent(name);
  console.log(`started the agent of node ${name} again (pid ${agent.child.pid})`);
});

async function startAgents() {
  const engine = await dockerStatus();
  const runtime = process.env.TETHER_RUNTIME ?? (engine.available ? 'docker' : 'none');
  const shared = { ...process.env, TETHER_PANEL_URL: panelUrl, TETHER_LOG_FORMAT: logFormat, TETHER_RUNTIME: runtime };
  const fleet = single ? null : await fleetEnv(engine, runtime);
  const shown = [];
  for (const node of nodes) {
    const proxy = await localProxy(engine, node);
    const env = { ...shared, TETHER_NODE_TOKEN: await nodeToken(api, node), TETHER_NODE_NAME: node.name, TETHER_STATE_DIR: node.stateDir, ...(fleet?.env ?? {}), ...proxy.env };
    if (node.network) env.TETHER_DOCKER_NETWORK = node.network;
    agents.set(node.name, { env, child: null });
    spawnAgent(node.name);
    shown.push({ ...node, proxy: env.TETHER_PROXY ?? 'none', httpPort: proxy.httpPort, proxyMissing: proxy.missing, pid: agents.get(node.name).child.pid });
  }
  console.log(
    [
      '',
      '────────────────────────────────────────────────────────────',
      ` Tether control panel: ${panelUrl}`,
      ` API docs (OpenAPI):   ${panelUrl}/docs`,
      ...(single ? [] : [` Fleet page:           ${panelUrl}/dashboard   (sign in with the operator token)`]),
      ` Operator token:       ${adminToken}`,
      ...(single ? [singleAgentLine(shown[0], runtime)] : fleetLines(shown, runtime, fleet)),
      ...(shown[0].proxyMissing ? [` Proxy:                ${shown[0].proxyMissing}`] : []),
      ` Try: curl -H "Authorization: Bearer ${adminToken}" ${panelUrl}/v1/sessions`,
      ` CLI:  echo ${adminToken} | npx tether login ${panelUrl}   then: npx tether status`,
      ' Start again from nothing: Ctrl-C, then npm run reset (add -- --volumes to drop volumes too)',
      '────────────────────────────────────────────────────────────',
      '',
    ].join('\n'),
  );
  if (runtime !== 'docker' || !engine.available) {
    const why = engine.available ? 'TETHER_RUNTIME=none was set' : engine.why;
    box([
      'Containers cannot run on this machine, so no sample service was deployed:',
      `  ${why}.`,
      `The panel and the ${single ? 'agent run; deployments to node "local"' : 'agents run; deployments to them'} end failed with RUNTIME_UNAVAILABLE.`,
    ]);
    return;
  }
  const network = (name) => (single ? baseNetwork() : nodes.find((n) => n.name === name)?.network ?? baseNetwork());
  const sample = await sampleService({ url: panelUrl, api, adminToken, nodes: shown, network }).catch((err) => box([`Sample service not deployed: ${err.message}`]));
  if (!single && sample) failoverHint(sample.nodes, shown);
}

function singleAgentLine(node, runtime) {
  return ` Local agent:          node "local", runtime ${runtime}, proxy ${node.proxy}${node.httpPort ? ` (Caddy on 127.0.0.1:${node.httpPort}, static routing)` : ''}`;
}

/** What a fleet of several shares (cross-node routing's private address, no canary: one port for all) and how it shows. */
async function fleetEnv(engine, runtime) {
  const routed = runtime === 'docker' && !proxyMissing(engine);
  const privateAddress = routed ? await fleetPrivateAddress() : { address: null, why: 'no proxy' };
  return {
    privateAddress,
    env: {
      // The canary's endpoint listens on one fixed port of the host: several agents would fight for it.
      TETHER_CANARY_INTERVAL_MS: process.env.TETHER_CANARY_INTERVAL_MS ?? '0',
      ...(privateAddress.address ? { TETHER_PRIVATE_ADDRESS: privateAddress.address } : {}),
    },
  };
}

function fleetLines(shown, runtime, fleet) {
  const routing = fleet.privateAddress.address
    ? `cross-node routing on private address ${fleet.privateAddress.address}`
    : `no cross-node routing (${fleet.privateAddress.why}): a node without a replica does not answer the sample's route`;
  return [
    ` Local agents:         ${shown.length} nodes, runtime ${runtime}, proxy ${shown[0].proxy}${shown[0].httpPort ? ' (static routing)' : ''}, ${routing}`,
    ...shown.map((n) => `   ${n.name.padEnd(8)} pid ${String(n.pid).padEnd(8)}${n.httpPort ? ` proxy 127.0.0.1:${n.httpPort}` : ''}   network ${n.network}, state ${n.stateDir.startsWith(root + path.sep) ? `./${path.relative(root, n.stateDir)}` : n.stateDir}`),
    ` Failover:             a node without its agent for ${rescheduleAfterMs / 1000} s has its replicas started elsewhere`,
    `                       (TETHER_RESCHEDULE_AFTER_MS; ${process.env.TETHER_RESCHEDULE_AFTER_MS ? 'as you set it' : `shortened for this local fleet, the panel's default is 60 s`})`,
  ];
}

function failoverHint(sampleNodes, shown) {
  const victim = sampleNodes[0];
  const idle = shown.map((n) => n.name).filter((n) => !sampleNodes.includes(n));
  box([
    `Try failover: stop the agent of a node that runs the sample, e.g. ${victim}:`,
    `  npm run node -- stop ${victim}        (or: kill ${agents.get(victim)?.child?.pid ?? '<its pid>'})`,
    `Its session closes at once; ${rescheduleAfterMs / 1000} s later the scheduler starts its replica on ${idle.length === 1 ? idle[0] : `one of ${idle.join(', ')}`}.`,
    `Watch it on ${panelUrl}/dashboard, or: npx tether status`,
    `npm run node -- start ${victim} brings the agent back; its old copy is then stopped (the replacement wins).`,
    'Stop one node at a time: with more than 30 % of the nodes gone at once, nothing moves (the brake on mass failure).',
  ]);
}
