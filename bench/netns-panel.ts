// The start the multi-host benchmarks share (cross-node.ts, failover.ts): an
// embedded PostgreSQL, a real panel process (apps/control-panel/dist) with
// allocations on, hosts made by testkit's createHostNetwork with their own
// Docker engines holding `image`, and a real agent (apps/host-agent/dist) per
// node, started inside its host's namespace.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import { startEmbeddedPostgres, freeTcpPort } from '@tether/embedded-postgres';
import { createHostNetwork, hostAgentEnv, spawnProcess, waitFor, type Host, type HostNetwork, type ManagedProcess } from '@tether/testkit';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export interface NetnsBench {
  net: HostNetwork;
  /** An operator's REST call to the panel; throws on a status ≥ 300. */
  api(method: string, url: string, body?: unknown): Promise<Record<string, unknown>>;
  /** Registers node `name` and starts its agent on `host`; resolves with the node's id. */
  addNode(host: Host, name: string): Promise<string>;
  /** Names of the nodes with a connected session now (GET /v1/sessions). */
  connected(): Promise<Set<string>>;
  close(): Promise<void>;
}

export interface NetnsBenchOptions {
  tag: string;
  hosts: number;
  image: string;
  /** The panel's environment beyond the database, port, token, data folder and TETHER_ALLOCATIONS. */
  panelEnv: Record<string, string>;
  lookupRefreshMs: number;
  remoteProbeMs: number;
}

export async function startNetnsBench(o: NetnsBenchOptions): Promise<NetnsBench> {
  const dir = await mkdtemp(path.join(os.tmpdir(), `bench-${o.tag}-`));
  const db = await startEmbeddedPostgres({ dataDir: path.join(dir, 'pg'), persistent: false });
  const net = await createHostNetwork({ tag: o.tag, hosts: o.hosts });
  const agents: ManagedProcess[] = [];
  let panel: ManagedProcess | undefined;
  const close = async () => {
    for (const a of agents) await a.stop().catch(() => undefined);
    await net.destroy();
    await panel?.stop().catch(() => undefined);
    await db.stop();
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await net.startDaemons([o.image]);
    const port = await freeTcpPort();
    const admin = randomBytes(24).toString('hex');
    panel = spawnProcess(process.execPath, [path.join(root, 'apps/control-panel/dist/main.js')], {
      env: {
        ...process.env,
        DATABASE_URL: db.url,
        TETHER_PORT: String(port),
        TETHER_HOST: '127.0.0.1',
        TETHER_ADMIN_TOKEN: admin,
        TETHER_DATA_DIR: path.join(dir, 'panel'),
        TETHER_LOG_LEVEL: 'warn',
        TETHER_ALLOCATIONS: 'on',
        ...o.panelEnv,
      },
    });
    const api = async (method: string, url: string, body?: unknown) => {
      const res = await fetch(`http://127.0.0.1:${port}${url}`, { method, headers: { authorization: `Bearer ${admin}`, ...(body ? { 'content-type': 'application/json' } : {}) }, body: body ? JSON.stringify(body) : null });
      const text = await res.text();
      if (res.status >= 300) throw new Error(`${method} ${url}: ${res.status} ${text}`);
      return text ? (JSON.parse(text) as Record<string, unknown>) : {};
    };
    await waitFor(() => fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.ok, () => false), { timeoutMs: 60_000, message: 'panel ready' });
    const panelUrl = await net.exposePanel(port);
    return {
      net,
      api,
      async addNode(host, name) {
        const node = await api('POST', '/v1/nodes', { name });
        const stateDir = path.join(dir, `agent-${name}`);
        agents.push(
          net.spawnIn(host, process.execPath, [path.join(root, 'apps/host-agent/dist/main.js')], {
            env: hostAgentEnv(host, { panelUrl, token: node.token as string, nodeName: name, stateDir, lookupRefreshMs: o.lookupRefreshMs, remoteProbeMs: o.remoteProbeMs, extra: { TETHER_LOG_LEVEL: 'warn' } }),
          }),
        );
        return node.id as string;
      },
      async connected() {
        const rows = ((await api('GET', '/v1/sessions')).sessions ?? []) as { nodeName: string; state: string }[];
        return new Set(rows.filter((r) => r.state === 'connected').map((r) => r.nodeName));
      },
      close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
