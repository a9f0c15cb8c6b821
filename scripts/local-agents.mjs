// The local agents of `npm start` (start-local.mjs): each node registered
// once (its token kept in the data directory), its proxy (Caddy and its
// answerer in containers, on two free ports of 127.0.0.1 kept across starts)
// and, for a fleet of several, its private address for cross-node routing.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { dataDir, docker } from './local-common.mjs';

/** Registers `node` once; its id and token live in its token file. */
export async function nodeToken(api, node) {
  if (existsSync(node.tokenFile)) return JSON.parse(readFileSync(node.tokenFile, 'utf8')).token;
  const res = await api('POST', '/v1/nodes', { name: node.name });
  if (res.status !== 201) {
    throw new Error(
      `could not register node "${node.name}" (${res.status} ${JSON.stringify(res.body)}); its token is not in ${node.tokenFile}, ` +
        'so the database was kept from an earlier start whose data directory is gone. Run `npm run reset` (it stops what runs and ' +
        'removes the local data wherever it lives, also the embedded PostgreSQL kept under /var/lib/tether/postgres), then `npm start`',
    );
  }
  mkdirSync(path.dirname(node.tokenFile), { recursive: true });
  writeFileSync(node.tokenFile, JSON.stringify({ id: res.body.id, token: res.body.token }), { mode: 0o600 });
  return res.body.token;
}

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
 * Whether a local proxy can run: the agent's Caddy container (TLS off: with automatic HTTPS, Caddy would redirect
 * a local name to 443) beside its answerer. Says which part is missing when it cannot.
 */
export function proxyMissing(engine) {
  if (process.env.TETHER_PROXY) return null;
  if (!engine.available) return `no proxy: ${engine.why}`;
  const caddyBinary = process.env.TETHER_CADDY_BINARY ?? '/usr/bin/caddy';
  if (!process.env.TETHER_CADDY_IMAGE && !existsSync(caddyBinary)) {
    return `no proxy: Caddy is not installed (${caddyBinary} is missing; apt-get install caddy, or set TETHER_CADDY_IMAGE to a Caddy image)`;
  }
  // The proxy's answerer (docs/operations.md, "Static proxy"): Debian's knotd in a container the agent builds.
  // Without it there is no proxy at all: the agent never falls back to reloading Caddy on routing changes.
  const knot = [process.env.TETHER_PROXY_KNOTD ?? '/usr/sbin/knotd', process.env.TETHER_PROXY_KNOTC ?? '/usr/sbin/knotc'];
  if (!process.env.TETHER_ANSWERER_IMAGE && !knot.every((f) => existsSync(f))) {
    return `no proxy: knot is not installed (${knot.filter((f) => !existsSync(f)).join(', ')} missing; apt-get install knot)`;
  }
  return null;
}

/** The proxy env of one node's agent, on the two ports kept in its ports file so later starts find the same container. */
export async function localProxy(engine, node) {
  if (process.env.TETHER_PROXY) return { env: {}, missing: null, httpPort: null };
  const missing = proxyMissing(engine);
  if (missing) return { env: { TETHER_PROXY: 'none' }, missing, httpPort: null };
  const ports = existsSync(node.portsFile) ? JSON.parse(readFileSync(node.portsFile, 'utf8')) : { http: await freePort(), https: await freePort() };
  mkdirSync(path.dirname(node.portsFile), { recursive: true });
  writeFileSync(node.portsFile, JSON.stringify(ports));
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

/**
 * The local fleet's private address (TETHER_PRIVATE_ADDRESS, cross-node routing): every agent shares this
 * machine's Docker engine, so one address serves them all: the gateway of Docker's default bridge, an address
 * of this host that every container reaches and no other machine does. Each agent publishes its replicas' port
 * there (a port Docker picks), and the other nodes' proxies forward to it. Null, with why, when there is none.
 */
export async function fleetPrivateAddress() {
  if (process.env.TETHER_PRIVATE_ADDRESS) return { address: process.env.TETHER_PRIVATE_ADDRESS, why: null };
  const bridge = await docker('GET', '/networks/bridge').catch((err) => ({ status: 0, text: err.message, json: null }));
  const gateway = bridge.json?.IPAM?.Config?.map((c) => c.Gateway).find((g) => g && !g.includes(':'));
  if (bridge.status === 200 && gateway) return { address: gateway, why: null };
  return { address: null, why: `Docker's default bridge network has no IPv4 gateway (${bridge.status} ${bridge.text.slice(0, 120)})` };
}

/** Where a start asks the running launcher to start one of its agents again (`npm run node -- start NAME`). */
export const startRequestFile = path.join(dataDir, 'start-request');
