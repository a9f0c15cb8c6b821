// What `npm start` (start-local.mjs) and `npm run reset` (reset-local.mjs) share:
// the local data directory, the file that says what runs, and the Docker
// Engine API over its unix socket (no Docker CLI needed).
import { readFileSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const dataDir = path.resolve(process.env.TETHER_DATA_DIR ?? path.join(root, '.tether'));
/** The launcher's and its children's process ids while a start runs (removed when it stops). */
export const runningFile = path.join(dataDir, 'running.json');
/** The node the launcher registers; its containers carry the label tether.node=<it>. */
export const LOCAL_NODE = 'local';

// The engine the local agent uses: DOCKER_HOST when it names a unix socket (the agent reads it too), else the default.
export const dockerSocket = process.env.DOCKER_HOST?.startsWith('unix://') ? process.env.DOCKER_HOST.slice('unix://'.length) : '/var/run/docker.sock';

/** One Docker Engine API call over the socket; rejects on a transport error or after `timeoutMs`. */
export function docker(method, apiPath, { body, contentType = 'application/json', timeoutMs = 10_000 } = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath: dockerSocket, method, path: apiPath, headers: body ? { 'content-type': contentType } : {} }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let json = null;
        try {
          json = text ? JSON.parse(text) : null;
        } catch {
          // Not JSON (a ping's "OK", an import's progress stream): keep the text.
        }
        resolve({ status: res.statusCode ?? 0, text, json });
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    if (typeof body === 'string') req.end(body);
    else if (body) body.pipe(req);
    else req.end();
  });
}

/** Whether the engine answers, and if not, why (said to the user as is). */
export async function dockerStatus() {
  try {
    const res = await docker('GET', '/_ping', { timeoutMs: 2_000 });
    if (res.status === 200) return { available: true, why: null };
    return { available: false, why: `the Docker engine at ${dockerSocket} answered /_ping with ${res.status}` };
  } catch (err) {
    const why = {
      ENOENT: `no Docker engine: ${dockerSocket} does not exist (install Docker, e.g. apt-get install docker.io, and start dockerd)`,
      ECONNREFUSED: `no Docker engine listening on ${dockerSocket} (is dockerd running?)`,
      EACCES: `no permission to use ${dockerSocket} (run as root or join the docker group)`,
    }[err.code];
    return { available: false, why: why ?? `the Docker engine at ${dockerSocket} did not answer: ${err.message}` };
  }
}


/** The launcher's script names: a pid in running.json counts as ours only while its command line names one. */
const OUR_SCRIPTS = ['start-local.mjs', path.join('control-panel', 'dist', 'main.js'), path.join('host-agent', 'dist', 'main.js')];

/** Whether `pid` is alive and is one of the launcher's processes (not a later process given the same pid). */
export function isOurs(pid) {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return OUR_SCRIPTS.some((s) => cmdline.includes(s));
  } catch {
    // No /proc (not Linux): a live pid is the best evidence there is.
    return true;
  }
}

/** running.json as written by a start, or null. */
export function readRunning() {
  try {
    const running = JSON.parse(readFileSync(runningFile, 'utf8'));
    const children = Array.isArray(running.children) ? running.children : [];
    // A fleet of several also names each agent's pid by node (null: stopped), for `npm run node`.
    return { launcher: running.launcher, children, ...(running.agents ? { agents: running.agents } : {}) };
  } catch {
    return null;
  }
}
