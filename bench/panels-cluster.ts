// Several panel processes on one embedded PostgreSQL for bench/panels.ts:
// each a real `apps/control-panel/dist/main.js` with its own TETHER_PANEL_ID
// (panel-a, panel-b, …), port, internal URL and data folder; the nodes and
// their tokens are inserted in bulk (REST would take minutes at 15,000).
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { startEmbeddedPostgres, freeTcpPort, type EmbeddedPostgresHandle } from '@tether/embedded-postgres';
import { spawnProcess, type ManagedProcess } from '@tether/testkit';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

export interface PanelProcess {
  id: string;
  url: string;
  process: ManagedProcess;
}

export interface ApiAnswer {
  status: number;
  ms: number;
  body: { id?: string; error?: { code: string } } & Record<string, unknown>;
}

export class BenchPanels {
  readonly panels: PanelProcess[] = [];
  readonly adminToken = `tth_op_${randomBytes(24).toString('base64url')}`;
  tokens: string[] = [];

  private constructor(
    private readonly dir: string,
    private readonly db: EmbeddedPostgresHandle,
    readonly dbUrl: string,
    readonly client: pg.Client,
  ) {}

  static async start(): Promise<BenchPanels> {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'tether-panels-'));
    const db = await startEmbeddedPostgres({ dataDir: path.join(dir, 'pg'), persistent: false });
    const dbUrl = await db.createDatabase('tether');
    const client = new pg.Client({ connectionString: dbUrl });
    await client.connect();
    return new BenchPanels(dir, db, dbUrl, client);
  }

  /** Starts panel `index` (panel-a, panel-b, …) on its own port; env adds or overrides settings. */
  async startPanel(index: number, env: Record<string, string> = {}): Promise<PanelProcess> {
    const id = `panel-${String.fromCharCode(97 + index)}`;
    const port = await freeTcpPort();
    const url = `http://127.0.0.1:${port}`;
    // Node flags for the panels only, e.g. BENCH_PANEL_NODE_ARGS='--cpu-prof --cpu-prof-dir=/tmp/prof' (not the bench, not the agents).
    const nodeArgs = (process.env.BENCH_PANEL_NODE_ARGS ?? '').split(' ').filter(Boolean);
    const child = spawnProcess(process.execPath, [...nodeArgs, path.join(root, 'apps/control-panel/dist/main.js')], {
      env: {
        DATABASE_URL: this.dbUrl,
        TETHER_PORT: String(port),
        TETHER_PANEL_ID: id,
        TETHER_PANEL_INTERNAL_URL: url,
        TETHER_LOG_LEVEL: process.env.BENCH_PANEL_LOG_LEVEL ?? 'warn',
        TETHER_ADMIN_TOKEN: this.adminToken,
        TETHER_DATA_DIR: path.join(this.dir, id),
        // Thousands of agents share each 127.0.0.x address here: the per-address cap is not what is measured.
        TETHER_MAX_CONNECTIONS_PER_ADDRESS: '1000000',
        ...env,
      },
    });
    await child.waitForOutput(/listening on \S+/, 60_000);
    const panel = { id, url, process: child };
    this.panels[index] = panel;
    return panel;
  }

  /** Nodes bench-0 … bench-(n-1) with fresh tokens, straight into the database. */
  async insertNodes(n: number): Promise<void> {
    this.tokens = Array.from({ length: n }, (_, i) => `tth_node_bench_${i}_${randomBytes(12).toString('base64url')}`);
    for (let i = 0; i < n; i += 5000) {
      const slice = this.tokens.slice(i, i + 5000);
      await this.client.query(`INSERT INTO nodes (id, name, token_hash) SELECT 'bench_' || n, 'bench-' || n, h FROM unnest($1::int[], $2::text[]) AS t(n, h)`, [
        slice.map((_, j) => i + j),
        slice.map(sha256),
      ]);
    }
  }

  async api(panel: PanelProcess, method: string, p: string, body?: unknown): Promise<ApiAnswer> {
    const started = performance.now();
    const res = await fetch(`${panel.url}${p}`, {
      method,
      headers: { authorization: `Bearer ${this.adminToken}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    const parsed = (await res.json().catch(() => ({}))) as ApiAnswer['body'];
    return { status: res.status, ms: performance.now() - started, body: parsed };
  }

  /** Which panel owns each node now (node_owners), by panel index; -1 for a panel not started here. */
  async owners(): Promise<Map<string, number>> {
    const { rows } = await this.client.query<{ node_id: string; panel_id: string }>('SELECT node_id, panel_id FROM node_owners');
    return new Map(rows.map((r) => [r.node_id, this.panels.findIndex((p) => p?.id === r.panel_id)]));
  }

  async stop(): Promise<void> {
    await Promise.all(this.panels.map((p) => p?.process.stop(10_000).catch(() => undefined)));
    await this.client.end().catch(() => undefined);
    await this.db.stop().catch(() => undefined);
    await rm(this.dir, { recursive: true, force: true }).catch(() => undefined);
  }
}
