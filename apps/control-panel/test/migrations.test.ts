import { createHash } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { cp, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPostgres, type TestPostgres } from '@tether/testkit';
import { MIGRATIONS_DIR } from '../src/db/database.js';
import { applyMigrations, MIGRATION_LOCK_KEY } from '../src/db/migrate.js';
import { catalogDiff, prismaCreateSql, readCatalog, runSql } from './helpers/schema-catalog.js';

// The panel applies prisma/migrations itself (Prisma's engine cannot run
// everywhere), so these tests prove it does what `prisma migrate deploy`
// would: apply once, record in _prisma_migrations, serialise concurrent
// panels on Prisma's advisory lock, and end with exactly what schema.prisma
// describes.

const SCHEMA = path.resolve(MIGRATIONS_DIR, '..', 'schema.prisma');
let server: TestPostgres;
let migrationNames: string[];
/** The catalog Prisma would create from schema.prisma. */
let expected: string[];

async function query<T extends pg.QueryResultRow>(url: string, sql: string, params: unknown[] = []): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql, params)).rows;
  } finally {
    await client.end();
  }
}

/** Applies every migration before `first` (the database as the release before it left it); the names left, in order. */
async function migrateBefore(url: string, first: string): Promise<string[]> {
  const before = await mkdtemp(path.join(os.tmpdir(), 'tether-before-'));
  const later = (await readdir(MIGRATIONS_DIR)).filter((name) => name >= first && !name.endsWith('.toml')).sort();
  try {
    await cp(MIGRATIONS_DIR, before, { recursive: true });
    for (const name of later) await rm(path.join(before, name), { recursive: true });
    await applyMigrations(url, before);
  } finally {
    await rm(before, { recursive: true, force: true });
  }
  return later;
}

/** The catalog Prisma would create from schema.prisma with one more column, which no migration adds. */
let expectedWithPlan: string[];

/** Applies what Prisma creates for `schemaFile` to a fresh database and reads its catalog. */
async function catalogFromSchema(schemaFile: string): Promise<string[]> {
  const url = await server.createDatabase();
  await runSql(url, await prismaCreateSql(schemaFile, await server.createDatabase()));
  return readCatalog(url);
}

beforeAll(async () => {
  server = await startTestPostgres();
  migrationNames = readdirSync(MIGRATIONS_DIR, { withFileTypes: true }).filter((e) => e.isDirectory()).map((e) => e.name).sort();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tether-schema-drift-'));
  try {
    const changed = path.join(dir, 'schema.prisma');
    await writeFile(changed, (await readFile(SCHEMA, 'utf8')).replace(/(model Team \{\n)/, '$1  plan String @default("free")\n'));
    // Both Prisma runs at once: each is a few seconds of CLI start-up.
    [expected, expectedWithPlan] = await Promise.all([catalogFromSchema(SCHEMA), catalogFromSchema(changed)]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});

afterAll(async () => {
  await server?.stop();
});

describe('applying migrations', () => {
  it('a fresh database gets every migration, recorded the way Prisma records them', async () => {
    const url = await server.createDatabase();
    const result = await applyMigrations(url, MIGRATIONS_DIR);
    expect(result).toEqual({ applied: migrationNames, alreadyApplied: [] });
    const rows = await query<{ migration_name: string; checksum: string; finished_at: Date | null; applied_steps_count: number }>(
      url,
      'SELECT migration_name, checksum, finished_at, applied_steps_count FROM "_prisma_migrations" ORDER BY migration_name',
    );
    expect(rows.map((r) => r.migration_name)).toEqual(migrationNames);
    for (const row of rows) {
      const sql = await readFile(path.join(MIGRATIONS_DIR, row.migration_name, 'migration.sql'));
      expect(row.checksum).toBe(createHash('sha256').update(sql).digest('hex'));
      expect(row.finished_at).toBeInstanceOf(Date);
      expect(row.applied_steps_count).toBe(1);
    }
  });

  it('running again is a no-op', async () => {
    const url = await server.createDatabase();
    await applyMigrations(url, MIGRATIONS_DIR);
    const before = await readCatalog(url);
    expect(await applyMigrations(url, MIGRATIONS_DIR)).toEqual({ applied: [], alreadyApplied: migrationNames });
    expect(await query(url, 'SELECT 1 FROM "_prisma_migrations"')).toHaveLength(migrationNames.length);
    expect(await readCatalog(url)).toEqual(before);
  });

  it('two panels starting at once: one applies, the other waits for the lock and finds nothing to do', async () => {
    const url = await server.createDatabase();
    const results = await Promise.all([applyMigrations(url, MIGRATIONS_DIR), applyMigrations(url, MIGRATIONS_DIR)]);
    const appliers = results.filter((r) => r.applied.length > 0);
    expect(appliers).toEqual([{ applied: migrationNames, alreadyApplied: [] }]);
    expect(results).toContainEqual({ applied: [], alreadyApplied: migrationNames });
    expect(await query(url, 'SELECT 1 FROM "_prisma_migrations"')).toHaveLength(migrationNames.length);
  });

  it('a panel really waits while another holds Prisma\'s migration lock', async () => {
    const url = await server.createDatabase();
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK_KEY]);
      let done = false;
      const waiting = applyMigrations(url, MIGRATIONS_DIR).then((r) => ((done = true), r));
      // The second panel's session shows up as waiting on the advisory lock, and has applied nothing.
      await expect
        .poll(async () => (await query(url, "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")).length, { timeout: 5000 })
        .toBe(1);
      expect(done).toBe(false);
      expect(await query(url, "SELECT 1 FROM pg_tables WHERE tablename = 'teams'")).toHaveLength(0);
      await holder.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK_KEY]);
      expect(await waiting).toEqual({ applied: migrationNames, alreadyApplied: [] });
    } finally {
      await holder.end();
    }
  });
});

describe('the migrated database matches schema.prisma', () => {
  it('every table, column (type, nullability, default), enum, key, foreign key action and index', async () => {
    const url = await server.createDatabase();
    await applyMigrations(url, MIGRATIONS_DIR);
    const actual = await readCatalog(url);
    expect(catalogDiff(expected, actual)).toEqual({ missing: [], unexpected: [] });
    // The comparison is not vacuous: it sees every model of the schema.
    for (const table of ['teams', 'api_tokens', 'nodes', 'services', 'routes', 'deployments', 'session_events', 'reload_events']) {
      expect(actual).toContain(`table ${table}`);
    }
    expect(actual).toContain('enum DeploymentStatus (pending, delivered, running, failed, ack_timeout, unreachable, superseded)');
    expect(actual).toContain('constraint services services_node_id_fkey FOREIGN KEY (node_id) REFERENCES nodes(id) ON UPDATE CASCADE ON DELETE RESTRICT');
  });

  it('route shapes: older spellings of a prefix are rewritten to the stored form, collisions and other shapes are left', async () => {
    const url = await server.createDatabase();
    await applyMigrations(url, MIGRATIONS_DIR);
    await runSql(
      url,
      `INSERT INTO teams (id, name) VALUES ('t', 't');
      INSERT INTO nodes (id, name, token_hash) VALUES ('n', 'n', 'h');
      INSERT INTO services (id, team_id, name, image, node_id, updated_at) VALUES ('s', 't', 's', 'nginx', 'n', now());
      INSERT INTO routes (id, domain, path_prefix, service_id, created_at) VALUES
        ('r1', 'a.example.com', '/', 's', now()),
        ('r2', 'a.example.com', '/API/V1/', 's', now()),
        ('r3', 'b.example.com', NULL, 's', now()),
        ('r4', 'b.example.com', '/', 's', now()),
        ('r5', 'c.example.com', '/Api', 's', now() - interval '1 hour'),
        ('r6', 'c.example.com', '/api/', 's', now()),
        ('r7', 'c.example.com', '/a/b/c/d', 's', now()),
        ('r8', 'c.example.com', '/a.b', 's', now()),
        ('r9', 'c.example.com', '/a_b-c', 's', now());`,
    );
    const sql = await readFile(path.join(MIGRATIONS_DIR, '20261203070000_route_shapes', 'migration.sql'), 'utf8');
    await runSql(url, sql);
    const rows = await query<{ id: string; path_prefix: string | null }>(url, 'SELECT id, path_prefix FROM routes ORDER BY id');
    expect(Object.fromEntries(rows.map((r) => [r.id, r.path_prefix]))).toEqual({
      r1: null,
      r2: '/api/v1',
      // The whole domain was taken: "/" stays as it was (listed, to be attached again).
      r3: null,
      r4: '/',
      // Two spellings of /api: the older one gets the stored form, the other keeps its own.
      r5: '/api',
      r6: '/api/',
      r7: '/a/b/c/d',
      r8: '/a.b',
      r9: '/a_b-c',
    });
  });

  it('allocations: an upgrade pins every service to its node, one allocation per replica on its running release, moving nothing', async () => {
    const url = await server.createDatabase();
    // The database as the release before it left it: the allocations migration and every later one not applied.
    const later = await migrateBefore(url, '20261203110000_allocations');
    await runSql(
      url,
      `INSERT INTO teams (id, name) VALUES ('t', 't');
      INSERT INTO nodes (id, name, token_hash) VALUES ('n1', 'web-1', 'h1'), ('n2', 'web-2', 'h2');
      INSERT INTO services (id, team_id, name, image, node_id, replicas, updated_at) VALUES
        ('three', 't', 'three', 'nginx', 'n1', 3, now()), ('stopped', 't', 'stopped', 'nginx', 'n2', 0, now()),
        ('fresh', 't', 'fresh', 'nginx', 'n2', 1, now());
      INSERT INTO deployments (id, service_id, node_id, spec, status, created_at) VALUES
        ('d-old', 'three', 'n1', '{}', 'running', now() - interval '2 hours'),
        ('d-now', 'three', 'n1', '{}', 'running', now() - interval '1 hour'),
        ('d-failed', 'three', 'n1', '{}', 'failed', now());`,
    );
    const applied = await applyMigrations(url, MIGRATIONS_DIR);
    expect(applied.applied).toEqual(later);
    expect(later[0]).toBe('20261203110000_allocations');
    const services = await query<{ id: string; placement: unknown }>(url, 'SELECT id, placement FROM services ORDER BY id');
    expect(services).toEqual([
      { id: 'fresh', placement: { nodes: ['web-2'] } },
      { id: 'stopped', placement: { nodes: ['web-2'] } },
      { id: 'three', placement: { nodes: ['web-1'] } },
    ]);
    const allocations = await query<{ service_id: string; node_id: string; release_id: string | null; desired: string; epoch: string }>(
      url,
      'SELECT service_id, node_id, release_id, desired, epoch::text FROM allocations ORDER BY service_id, id',
    );
    expect(allocations).toEqual([
      { service_id: 'fresh', node_id: 'n2', release_id: null, desired: 'run', epoch: '0' },
      ...Array(3).fill({ service_id: 'three', node_id: 'n1', release_id: 'd-now', desired: 'run', epoch: '0' }),
    ]);
    expect(await query(url, "SELECT labels, cordoned FROM nodes WHERE id = 'n1'")).toEqual([{ labels: {}, cordoned: false }]);
  });

  it('service pending: an upgrade keeps every service and deployment on its node, none pending; only new rows may have no node', async () => {
    const url = await server.createDatabase();
    const later = await migrateBefore(url, '20261205150000_service_pending');
    await runSql(
      url,
      `INSERT INTO teams (id, name) VALUES ('t', 't');
      INSERT INTO nodes (id, name, token_hash) VALUES ('n1', 'web-1', 'h1');
      INSERT INTO services (id, team_id, name, image, node_id, replicas, updated_at) VALUES ('web', 't', 'web', 'nginx', 'n1', 2, now());
      INSERT INTO deployments (id, service_id, node_id, spec, status) VALUES ('d1', 'web', 'n1', '{}', 'running');
      INSERT INTO allocations (id, service_id, node_id, release_id, cause, epoch) VALUES ('a1', 'web', 'n1', 'd1', 'migrated', 0);`,
    );
    const applied = await applyMigrations(url, MIGRATIONS_DIR);
    expect(applied.applied).toEqual(later);
    expect(later[0]).toBe('20261205150000_service_pending');
    expect(await query(url, 'SELECT id, node_id, pending FROM services')).toEqual([{ id: 'web', node_id: 'n1', pending: null }]);
    expect(await query(url, 'SELECT id, node_id FROM deployments')).toEqual([{ id: 'd1', node_id: 'n1' }]);
    expect(await query(url, 'SELECT id, node_id, release_id, desired FROM allocations')).toEqual([{ id: 'a1', node_id: 'n1', release_id: 'd1', desired: 'run' }]);
    // A new service may have no node now; a node it names must still exist.
    await runSql(url, `INSERT INTO services (id, team_id, name, image, node_id, updated_at) VALUES ('waiting', 't', 'waiting', 'nginx', NULL, now())`);
    await expect(runSql(url, `INSERT INTO services (id, team_id, name, image, node_id, updated_at) VALUES ('bad', 't', 'bad', 'nginx', 'nope', now())`)).rejects.toThrow(/foreign key/);
  });

  it('fails when a migration drifts from the schema (an extra statement in a copy of the migrations)', async () => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'tether-drift-'));
    try {
      await cp(MIGRATIONS_DIR, dir, { recursive: true });
      const drift = [
        'ALTER TABLE "services" ALTER COLUMN "image" DROP NOT NULL;',
        'ALTER TABLE "routes" ALTER COLUMN "path_prefix" SET DEFAULT \'/\';',
        'ALTER TYPE "DeploymentStatus" ADD VALUE \'cancelled\';',
        'CREATE INDEX "nodes_created_at_idx" ON "nodes"("created_at");',
        'ALTER TABLE "routes" DROP CONSTRAINT "routes_service_id_fkey";',
        'ALTER TABLE "routes" ADD CONSTRAINT "routes_service_id_fkey" FOREIGN KEY ("service_id") REFERENCES "services"("id") ON DELETE RESTRICT ON UPDATE CASCADE;',
        'ALTER TABLE "teams" ADD COLUMN "plan" TEXT;',
        'ALTER TABLE "deployments" ALTER COLUMN "reason" TYPE VARCHAR(200);',
      ];
      await mkdir(path.join(dir, '20991231000000_drift'));
      await writeFile(path.join(dir, '20991231000000_drift', 'migration.sql'), drift.join('\n'));
      const url = await server.createDatabase();
      await applyMigrations(url, dir);
      const { missing, unexpected } = catalogDiff(expected, await readCatalog(url));
      const all = [...missing, ...unexpected].join('\n');
      expect(all).toContain('column services.image text NULL');
      expect(all).toContain("column routes.path_prefix text NULL DEFAULT '/'::text");
      expect(all).toContain('enum DeploymentStatus (pending, delivered, running, failed, ack_timeout, unreachable, superseded, cancelled)');
      expect(all).toContain('index CREATE INDEX nodes_created_at_idx');
      expect(all).toContain('routes_service_id_fkey FOREIGN KEY (service_id) REFERENCES services(id) ON UPDATE CASCADE ON DELETE RESTRICT');
      expect(all).toContain('column teams.plan text NULL');
      expect(all).toContain('column deployments.reason character varying(200) NULL');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('fails when schema.prisma changes without a migration', async () => {
    const migrated = await server.createDatabase();
    await applyMigrations(migrated, MIGRATIONS_DIR);
    expect(catalogDiff(expectedWithPlan, await readCatalog(migrated))).toEqual({
      missing: ["column teams.plan text NOT NULL DEFAULT 'free'::text"],
      unexpected: [],
    });
  });
});
