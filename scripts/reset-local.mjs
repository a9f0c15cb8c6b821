#!/usr/bin/env node
// `npm run reset [-- --volumes]`: back to before the first `npm start`. Stops
// what a start from this folder runs, removes node "local"'s containers (the
// sample service, the proxy) and the local data wherever it lives: ./.tether
// and, as root from a folder the `postgres` user cannot reach, the embedded
// PostgreSQL's cluster under /var/lib/tether/postgres. Says what it removed
// and where. Volumes are kept unless --volumes is given; images are kept (the
// sample image is rebuilt in seconds, and other things may use it).
import { existsSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { LOCAL_NODE, dataDir, docker, dockerStatus, isOurs, readRunning, root } from './local-common.mjs';

const STOP_GRACE_MS = 15_000;
const { values } = parseArgs({ options: { volumes: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h' } } });
if (values.help) {
  console.log('usage: npm run reset [-- --volumes]\n  stops a running `npm start`, removes node "local"\'s containers and the local data;\n  --volumes also removes the volumes of node "local"');
  process.exit(0);
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Sends `signal` to each pid, waits up to `graceMs` for all to end; returns those still alive. */
async function stopPids(pids, signal, graceMs, alive) {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // Ended in between.
    }
  }
  const deadline = Date.now() + graceMs;
  let left = pids.filter(alive);
  while (left.length > 0 && Date.now() < deadline) {
    await sleep(100);
    left = left.filter(alive);
  }
  return left;
}

/** The launcher and its children, as running.json names them; SIGTERM first (the panel stops its PostgreSQL), SIGKILL after the grace. */
async function stopStart() {
  const running = readRunning();
  const pids = running ? [running.launcher, ...running.children].filter(isOurs) : [];
  if (pids.length === 0) return console.log('• nothing running from this folder');
  const left = await stopPids(pids, 'SIGTERM', STOP_GRACE_MS, isOurs);
  if (left.length > 0) await stopPids(left, 'SIGKILL', 2_000, isOurs);
  console.log(`• stopped the running start (pids ${pids.join(', ')}${left.length > 0 ? `; ${left.join(', ')} only by SIGKILL` : ''})`);
}

/** A PostgreSQL still running on `cluster` (a panel killed without its stop): fast shutdown, as pg_ctl -m fast does. */
async function stopPostgres(cluster) {
  const pidFile = path.join(cluster, 'postmaster.pid');
  if (!existsSync(pidFile)) return;
  const pid = Number(readFileSync(pidFile, 'utf8').split('\n')[0]);
  const alive = (p) => {
    try {
      process.kill(p, 0);
      return readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('postgres');
    } catch {
      return false;
    }
  };
  if (!alive(pid)) return;
  const left = await stopPids([pid], 'SIGINT', STOP_GRACE_MS, alive);
  if (left.length > 0) await stopPids(left, 'SIGKILL', 2_000, alive);
  console.log(`• stopped the embedded PostgreSQL left running on ${cluster} (pid ${pid})`);
}

const labelFilter = encodeURIComponent(JSON.stringify({ label: [`tether.node=${LOCAL_NODE}`] }));

async function removeContainers(engine) {
  if (!engine.available) return console.log(`• containers not looked for: ${engine.why}`);
  const list = await docker('GET', `/containers/json?all=1&filters=${labelFilter}`);
  if (list.status !== 200) throw new Error(`listing containers failed: ${list.status} ${list.text.slice(0, 200)}`);
  const removed = [];
  for (const c of list.json ?? []) {
    const res = await docker('DELETE', `/containers/${c.Id}?force=1${values.volumes ? '&v=1' : ''}`, { timeoutMs: 30_000 });
    if (res.status !== 204 && res.status !== 404) throw new Error(`removing container ${c.Names?.[0] ?? c.Id} failed: ${res.status} ${res.text.slice(0, 200)}`);
    removed.push((c.Names?.[0] ?? c.Id).replace(/^\//, ''));
  }
  console.log(removed.length > 0 ? `• removed ${removed.length} container(s) of node "${LOCAL_NODE}": ${removed.join(', ')}` : `• no containers of node "${LOCAL_NODE}"`);
}

async function handleVolumes(engine) {
  if (!engine.available) return;
  const list = await docker('GET', `/volumes?filters=${labelFilter}`);
  if (list.status !== 200) throw new Error(`listing volumes failed: ${list.status} ${list.text.slice(0, 200)}`);
  const names = (list.json?.Volumes ?? []).map((v) => v.Name);
  if (names.length === 0) return;
  if (!values.volumes) return console.log(`• kept ${names.length} volume(s) of node "${LOCAL_NODE}": ${names.join(', ')} (npm run reset -- --volumes removes them)`);
  for (const name of names) {
    const res = await docker('DELETE', `/volumes/${encodeURIComponent(name)}?force=1`, { timeoutMs: 30_000 });
    if (res.status !== 204 && res.status !== 404) throw new Error(`removing volume ${name} failed: ${res.status} ${res.text.slice(0, 200)}`);
  }
  console.log(`• removed ${names.length} volume(s) of node "${LOCAL_NODE}": ${names.join(', ')}`);
}

/** Where the embedded PostgreSQL's cluster can be: in the data directory, or moved (root, unreachable folder). */
async function clusterFolders() {
  const requested = path.join(dataDir, 'postgres');
  const entry = path.join(root, 'packages', 'embedded-postgres', 'dist', 'index.js');
  if (!existsSync(entry)) return [requested];
  const { movedDataDir } = await import(pathToFileURL(entry).href);
  return [requested, movedDataDir(requested)];
}

async function removeData() {
  if (process.env.DATABASE_URL) console.log('• DATABASE_URL is set: that database is not the local one and is not touched');
  for (const cluster of await clusterFolders()) {
    await stopPostgres(cluster);
    if (!existsSync(cluster)) continue;
    rmSync(cluster, { recursive: true, force: true });
    console.log(`• removed the embedded PostgreSQL's data: ${cluster}`);
  }
  if (existsSync(dataDir)) {
    rmSync(dataDir, { recursive: true, force: true });
    console.log(`• removed the local data directory: ${dataDir}`);
  }
}

try {
  await stopStart();
  const engine = await dockerStatus();
  await removeContainers(engine);
  await handleVolumes(engine);
  await removeData();
  console.log('Reset done: `npm start` begins from nothing (a new operator token, node "local" registered again).');
} catch (err) {
  console.error(`✖ reset stopped: ${err.message}`);
  process.exit(1);
}
