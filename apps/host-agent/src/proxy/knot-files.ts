import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { readFileIfExists, writeFileAtomic } from '../state/atomic-file.js';
import { ANSWER_ZONE } from './static-answers.js';

// knotd's files, the same for the process and the container answerer: its
// config, the zone the agent writes, pid file, control socket, database. In
// container mode the folder is bind-mounted at the same path inside the
// answerer container, so the config names the same paths on both sides.

export interface KnotPaths {
  dir: string;
  conf: string;
  zone: string;
  pid: string;
  socket: string;
  log: string;
  db: string;
}

/**
 * `runDir` holds the pid file and the control socket: the folder itself for a
 * process, the container's own /run/knot for a container (a pid file left in
 * the shared folder would name pid 1, which is alive in every new container,
 * and knotd refuses to start while its pid file names a live process).
 */
export function knotPaths(dir: string, runDir = dir): KnotPaths {
  return {
    dir,
    conf: path.join(dir, 'knot.conf'),
    zone: path.join(dir, 'zones', `${ANSWER_ZONE}.zone`),
    pid: path.join(runDir, 'knot.pid'),
    socket: path.join(runDir, 'knot.sock'),
    log: path.join(dir, 'knot.log'),
    db: path.join(dir, 'db'),
  };
}

/** knot.conf: one zone, loaded whole from the agent's file, never written back. */
export function knotConf(paths: KnotPaths, listen: { host: string; port: number }): string {
  const q = (s: string) => JSON.stringify(s);
  return [
    'server:',
    `    rundir: ${q(paths.dir)}`,
    `    pidfile: ${q(paths.pid)}`,
    `    listen: ${listen.host}@${listen.port}`,
    'control:',
    `    listen: ${q(paths.socket)}`,
    'database:',
    `    storage: ${q(paths.db)}`,
    'log:',
    '  - target: stderr',
    '    any: warning',
    // Queries by type (`knotc -s <socket> stats mod-stats`): how many of Caddy's requests missed its cache.
    'mod-stats:',
    '  - id: lookups',
    '    request-protocol: off',
    '    server-operation: off',
    '    request-bytes: off',
    '    response-bytes: off',
    '    response-code: off',
    '    query-type: on',
    'template:',
    '  - id: default',
    '    global-module: mod-stats/lookups',
    `    storage: ${q(path.dirname(paths.zone))}`,
    '    file: "%s.zone"',
    // The agent owns the file: knotd never writes it back, keeps no journal, always loads it whole.
    '    zonefile-sync: -1',
    '    zonefile-load: whole',
    '    journal-content: none',
    'zone:',
    `  - domain: ${ANSWER_ZONE}`,
    '',
  ].join('\n');
}

/** Writes the config and, when there is none yet, an empty zone (knotd serves a zone only when its file exists). */
export async function prepareKnotFiles(paths: KnotPaths, listen: { host: string; port: number }): Promise<void> {
  await mkdir(path.dirname(paths.zone), { recursive: true });
  await mkdir(paths.db, { recursive: true });
  await writeFileAtomic(paths.conf, knotConf(paths, listen));
  if ((await readFileIfExists(paths.zone)) === null) await writeFileAtomic(paths.zone, zoneText([], 1));
}

/** The zone file: SOA and NS with `serial`, then `records` (relative names). TTL 1: Caddy keeps its own cache. */
export function zoneText(records: readonly string[], serial: number): string {
  return [
    `$ORIGIN ${ANSWER_ZONE}.`,
    '$TTL 1',
    `@ SOA ns hostmaster ${serial} 60 60 60 1`,
    '@ NS ns',
    'ns A 127.0.0.1',
    'health A 127.0.0.1',
    ...records.filter((r) => !r.startsWith('health ')),
    '',
  ].join('\n');
}
