// The local fleet of `npm start [-- --nodes N]` (start-local.mjs), shared with
// `npm run reset` (reset-local.mjs) and `npm run node` (local-node.mjs): how
// many agents, their node names, where each keeps its token, proxy ports and
// state, and its Docker network. One node is node `local`, laid out as before
// the flag existed; N > 1 are `local-1` … `local-N`, each with its own files
// under ./.tether/nodes and its own network `<TETHER_DOCKER_NETWORK>-local-i`.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { LOCAL_NODE, dataDir } from './local-common.mjs';

export const MAX_NODES = 9;
/** Node names a local start registers (reset removes their containers): `local`, `local-1` … `local-9`. */
export const LOCAL_NODE_NAME = /^local(-[1-9])?$/;
/** The Docker network Tether's agents use when TETHER_DOCKER_NETWORK is unset (the agent's default). */
export const baseNetwork = () => process.env.TETHER_DOCKER_NETWORK ?? 'tether';
/** The grace after which a stopped local agent's replicas move, for a fleet of several (the panel's default is 60 s). */
export const LOCAL_RESCHEDULE_AFTER_MS = 10_000;

/** A usage error: said in one line, exit code 2. */
export class UsageError extends Error {}

/** `--nodes N` of `npm start -- …` (null when not given); throws UsageError for anything else. */
export function parseStartArgs(argv) {
  let values;
  try {
    ({ values } = parseArgs({ args: argv, options: { nodes: { type: 'string' } }, strict: true, allowPositionals: false }));
  } catch (err) {
    throw new UsageError(`${err.message.split('\n')[0]}; usage: npm start [-- --nodes N]   (N local agents, 1 to ${MAX_NODES})`);
  }
  if (values.nodes === undefined) return { nodes: null };
  if (!/^[0-9]+$/.test(values.nodes) || Number(values.nodes) < 1 || Number(values.nodes) > MAX_NODES) {
    throw new UsageError(`--nodes must be a whole number from 1 to ${MAX_NODES} (got "${values.nodes}"); usage: npm start -- --nodes 3`);
  }
  return { nodes: Number(values.nodes) };
}

const fleetFile = path.join(dataDir, 'fleet.json');

/** How many local nodes this data directory holds: 1 (node `local`), N (fleet.json), or null when nothing was made yet. */
export function recordedFleetSize() {
  if (existsSync(fleetFile)) return JSON.parse(readFileSync(fleetFile, 'utf8')).nodes;
  return existsSync(path.join(dataDir, 'local-node.json')) ? 1 : null;
}

/**
 * The fleet size to start: the flag's, else the one the data directory holds, else 1. A flag that differs from
 * what the directory holds is a UsageError naming both ways out (its registered nodes and sample stay in the database).
 */
export function chooseFleetSize(flag) {
  const recorded = recordedFleetSize();
  if (flag !== null && recorded !== null && flag !== recorded) {
    const made = recorded === 1 ? '`npm start` (node "local")' : `\`npm start -- --nodes ${recorded}\``;
    throw new UsageError(
      `this data directory (${dataDir}) holds ${recorded} local node(s), made by ${made}: start it again with ${recorded === 1 ? '`npm start`' : `\`npm start -- --nodes ${recorded}\``}, ` +
        `or run \`npm run reset\` first to start ${flag} from nothing`,
    );
  }
  return flag ?? recorded ?? 1;
}

/** Remembers a fleet of several in the data directory (one node needs no record: its files say so). */
export function recordFleetSize(nodes) {
  if (nodes > 1) writeFileSync(fleetFile, `${JSON.stringify({ nodes })}\n`);
}

/** Where one local node keeps what it needs across starts. */
export function localNode(name, fleetSize) {
  if (fleetSize === 1) {
    return {
      name: LOCAL_NODE,
      tokenFile: path.join(dataDir, 'local-node.json'),
      portsFile: path.join(dataDir, 'proxy-ports.json'),
      stateDir: path.join(dataDir, 'agent'),
      network: null,
    };
  }
  return {
    name,
    tokenFile: path.join(dataDir, 'nodes', `${name}.json`),
    portsFile: path.join(dataDir, 'nodes', `${name}-proxy-ports.json`),
    stateDir: path.join(dataDir, 'agents', name),
    network: `${baseNetwork()}-${name}`,
  };
}

/** The fleet's nodes, in order. */
export function localNodes(fleetSize) {
  if (fleetSize === 1) return [localNode(LOCAL_NODE, 1)];
  return Array.from({ length: fleetSize }, (_, i) => localNode(`local-${i + 1}`, fleetSize));
}
