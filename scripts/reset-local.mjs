#!/usr/bin/env node
// `npm run reset [-- --volumes]`: back to before the first `npm start`. Stops
// what a start from this folder runs, removes the local nodes' containers
// (node "local", or `local-1` … `local-N` of `npm start -- --nodes N`: the
// sample service, the proxies and their answerers), a fleet's Docker networks
// and their isolation rules, and the local data wherever it lives: ./.tether
// and, as root from a folder the `postgres` user cannot reach, the embedded
// PostgreSQL's cluster under /var/lib/tether/postgres. Says what it removed
// and where. Volumes are kept unless --volumes is given; images are kept (the
// sample image is rebuilt in seconds, and other things may use it).
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';
import { LOCAL_NODE, dataDir, docker, dockerStatus, isOurs, readRunning, root } from './local-common.mjs';
import { LOCAL_NODE_NAME, baseNetwork, localNodes, recordedFleetSize } from './local-fleet.mjs';

const STOP_GRACE_MS = 15_000;
const { values } = parseArgs({ options: { volumes: { type: 'boolean', default: false }, help: { type: 'boolean', short: 'h' } } });
if (values.help) {
  console.log('usage: npm run reset [-- --volumes]\n  stops a running `npm start`, removes the local nodes\' containers (node "local", or local-1 … local-N) and the local data;\n  --volumes also removes their volumes');
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

// Every object Tether's agents label with their node; the local nodes' are picked by name (Docker ANDs label filters).
const labelFilter = encodeURIComponent(JSON.stringify({ label: ['tether.node'] }));
const isLocal = (labels) => LOCAL_NODE_NAME.test(labels?.['tether.node'] ?? '');
/** The fleet this data directory holds (read before it is removed): 1, N, or null when nothing says. */
const fleetSize = recordedFleetSize();

/** "node "local"" as before fleets, or the fleet's node names. */
function whose(found) {
  const names = [...new Set(found)].sort();
  if (names.length === 0) names.push(...localNodes(fleetSize ?? 1).map((n) => n.name));
  return names.length === 1 && names[0] === LOCAL_NODE ? `node "${LOCAL_NODE}"` : `nodes ${names.join(', ')}`;
}

async function removeContainers(engine) {
  if (!engine.available) return console.log(`• containers not looked for: ${engine.why}`);
  const list = await docker('GET', `/containers/json?all=1&filters=${labelFilter}`);
  if (list.status !== 200) throw new Error(`listing containers failed: ${list.status} ${list.text.slice(0, 200)}`);
  const removed = [];
  const local = (list.json ?? []).filter((c) => isLocal(c.Labels));
  for (const c of local) {
    const res = await docker('DELETE', `/containers/${c.Id}?force=1${values.volumes ? '&v=1' : ''}`, { timeoutMs: 30_000 });
    if (res.status !== 204 && res.status !== 404) throw new Error(`removing container ${c.Names?.[0] ?? c.Id} failed: ${res.status} ${res.text.slice(0, 200)}`);
    removed.push((c.Names?.[0] ?? c.Id).replace(/^\//, ''));
  }
  const of = whose(local.map((c) => c.Labels['tether.node']));
  console.log(removed.length > 0 ? `• removed ${removed.length} container(s) of ${of}: ${removed.join(', ')}` : `• no containers of ${of}`);
}

/**
 * A fleet's networks (`<TETHER_DOCKER_NETWORK>-local-i`, one per agent) and the isolation rule each agent keeps for
 * its network in DOCKER-USER (cross-node routing): made for the fleet, gone with it. Node "local" uses the shared
 * network (`tether`), which stays.
 */
async function removeFleetNetworks(engine) {
  const pattern = new RegExp(`^${baseNetwork().replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}-local-[1-9]$`);
  const removed = [];
  if (engine.available) {
    const list = await docker('GET', '/networks');
    if (list.status !== 200) throw new Error(`listing networks failed: ${list.status} ${list.text.slice(0, 200)}`);
    for (const n of (list.json ?? []).filter((n) => pattern.test(n.Name))) {
      const res = await docker('DELETE', `/networks/${n.Id}`, { timeoutMs: 30_000 });
      if (res.status !== 204 && res.status !== 404) throw new Error(`removing network ${n.Name} failed: ${res.status} ${res.text.slice(0, 200)}`);
      removed.push(n.Name);
    }
  }
  if (removed.length > 0) console.log(`• removed ${removed.length} Docker network(s) of the local fleet: ${removed.sort().join(', ')}`);
  const rules = [];
  for (const binary of ['iptables', 'ip6tables']) {
    const listed = spawnSync(binary, ['-w', '-S', 'DOCKER-USER'], { encoding: 'utf8' });
    if (listed.status !== 0) continue;
    for (const line of listed.stdout.split('\n')) {
      const comment = /--comment "?tether-isolation:([^\s"]+)"?/.exec(line)?.[1];
      if (!comment || !pattern.test(comment)) continue;
      const args = line.trim().split(/\s+/).map((t) => t.replace(/^"|"$/g, ''));
      args[0] = '-D';
      if (spawnSync(binary, ['-w', ...args]).status === 0) rules.push(comment);
    }
  }
  if (rules.length > 0) console.log(`• removed ${rules.length} isolation rule(s) of the local fleet from DOCKER-USER: ${rules.sort().join(', ')}`);
}

async function handleVolumes(engine) {
  if (!engine.available) return;
  const list = await docker('GET', `/volumes?filters=${labelFilter}`);
  if (list.status !== 200) throw new Error(`listing volumes failed: ${list.status} ${list.text.slice(0, 200)}`);
  const local = (list.json?.Volumes ?? []).filter((v) => isLocal(v.Labels));
  const names = local.map((v) => v.Name);
  if (names.length === 0) return;
  const of = whose(local.map((v) => v.Labels['tether.node']));
  if (!values.volumes) return console.log(`• kept ${names.length} volume(s) of ${of}: ${names.join(', ')} (npm run reset -- --volumes removes them)`);
  for (const name of names) {
    const res = await docker('DELETE', `/volumes/${encodeURIComponent(name)}?force=1`, { timeoutMs: 30_000 });
    if (res.status !== 204 && res.status !== 404) throw new Error(`removing volume ${name} failed: ${res.status} ${res.text.slice(0, 200)}`);
  }
  console.log(`• removed ${names.length} volume(s) of ${of}: ${names.join(', ')}`);
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
  await removeFleetNetworks(engine);
  await handleVolumes(engine);
  await removeData();
  console.log(`Reset done: \`npm start\` begins from nothing (a new operator token, ${fleetSize > 1 ? 'the nodes' : 'node "local"'} registered again).`);
} catch (err) {
  console.error(`✖ reset stopped: ${err.message}`);
  process.exit(1);
}
