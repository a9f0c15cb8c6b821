#!/usr/bin/env node
// `npm start`: the control panel on an embedded PostgreSQL kept in ./.tether,
// plus one local agent registered as node `local`. Prints the panel URL and an
// operator token. Ctrl-C stops both.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dataDir = path.resolve(process.env.TETHER_DATA_DIR ?? path.join(root, '.tether'));
mkdirSync(dataDir, { recursive: true, mode: 0o755 });

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
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    stopAll(signal);
    setTimeout(() => process.exit(0), 8_000).unref();
  });
}

function dockerAvailable() {
  return new Promise((resolve) => {
    const req = http.request({ socketPath: '/var/run/docker.sock', path: '/_ping', timeout: 2_000 }, (res) => {
      res.resume();
      resolve(res.statusCode === 200);
    });
    req.on('error', () => resolve(false));
    req.on('timeout', () => {
      req.destroy();
      resolve(false);
    });
    req.end();
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
  const res = await api(url, 'POST', '/v1/nodes', { name: 'local' });
  if (res.status !== 201) {
    throw new Error(
      `could not register node "local" (${res.status} ${JSON.stringify(res.body)}); its token is not in ${file}: ` +
        `decommission it (DELETE /v1/nodes/<id>) and use a new data directory, or remove ${dataDir}`,
    );
  }
  writeFileSync(file, JSON.stringify({ id: res.body.id, token: res.body.token }), { mode: 0o600 });
  return res.body.token;
}

const panelEnv = { ...process.env, TETHER_DATA_DIR: dataDir, TETHER_ADMIN_TOKEN: adminToken };
const panel = spawn(process.execPath, [path.join(root, 'apps', 'control-panel', 'dist', 'main.js')], {
  cwd: root,
  env: panelEnv,
  stdio: ['ignore', 'pipe', 'inherit'],
});
children.push(panel);
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

async function startAgent(url) {
  const token = await localNodeToken(url);
  const docker = await dockerAvailable();
  const agentEnv = {
    ...process.env,
    TETHER_PANEL_URL: url,
    TETHER_NODE_TOKEN: token,
    TETHER_NODE_NAME: 'local',
    TETHER_STATE_DIR: path.join(dataDir, 'agent'),
    TETHER_RUNTIME: process.env.TETHER_RUNTIME ?? (docker ? 'docker' : 'none'),
    TETHER_PROXY: process.env.TETHER_PROXY ?? 'none',
  };
  const agent = spawn(process.execPath, [path.join(root, 'apps', 'host-agent', 'dist', 'main.js')], {
    cwd: root,
    env: agentEnv,
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  children.push(agent);
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
      ` Local agent:          node "local", runtime ${agentEnv.TETHER_RUNTIME}${docker ? '' : ' (no Docker engine at /var/run/docker.sock: containers cannot run)'}`,
      ` Try: curl -H "Authorization: Bearer ${adminToken}" ${url}/v1/sessions`,
      '────────────────────────────────────────────────────────────',
      '',
    ].join('\n'),
  );
}
