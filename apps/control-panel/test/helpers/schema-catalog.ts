import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';

// Proof that the migrated database is what schema.prisma describes.
//
// Prisma 7's `migrate diff` needs a native schema engine that cannot be
// downloaded everywhere (see shared ENVIRONMENT.md). Prisma 6.19's CLI has a
// Wasm engine (`engine: "js"` with a driver adapter) that prints the SQL
// Prisma would create for a schema, offline. It is a devDependency under an
// alias (prisma6, prisma6-adapter-pg) so it never replaces Prisma 7.
// The test applies that SQL to one database, the panel's migrations to
// another, and compares the two catalogs as PostgreSQL reports them.

const execFileAsync = promisify(execFile);
const require = createRequire(import.meta.url);

/** The SQL Prisma creates for `schemaFile` (Prisma 7 schema syntax), from an empty database. */
export async function prismaCreateSql(schemaFile: string, scratchDatabaseUrl: string): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'tether-prisma6-'));
  try {
    // Prisma 6 wants the classic generator and a datasource URL; the models are untouched.
    const schema = (await readFile(schemaFile, 'utf8'))
      .replace(/generator client \{[^}]*\}/, 'generator client {\n  provider = "prisma-client-js"\n}')
      .replace(/datasource db \{[^}]*\}/, `datasource db {\n  provider = "postgresql"\n  url = ${JSON.stringify(scratchDatabaseUrl)}\n}`);
    await writeFile(path.join(dir, 'schema.prisma'), schema);
    const adapter = pathToFileURL(require.resolve('prisma6-adapter-pg')).href;
    await writeFile(
      path.join(dir, 'prisma.config.ts'),
      `import { PrismaPg } from ${JSON.stringify(adapter)};
export default {
  experimental: { adapter: true },
  engine: 'js',
  schema: 'schema.prisma',
  // allowExitOnIdle: the CLI would otherwise wait for pg's 10 s idle timeout before exiting.
  async adapter() { return new PrismaPg({ connectionString: ${JSON.stringify(scratchDatabaseUrl)}, allowExitOnIdle: true, idleTimeoutMillis: 50 }); },
};
`,
    );
    const cli = path.join(path.dirname(require.resolve('prisma6/package.json')), 'build', 'index.js');
    const { stdout } = await execFileAsync(process.execPath, [cli, 'migrate', 'diff', '--from-empty', '--to-schema-datamodel', 'schema.prisma', '--script'], {
      cwd: dir,
      timeout: 60_000,
      env: {
        ...process.env,
        // Any existing files: they stop the CLI from downloading engines the Wasm path does not use.
        PRISMA_QUERY_ENGINE_LIBRARY: process.execPath,
        PRISMA_SCHEMA_ENGINE_BINARY: process.execPath,
        CHECKPOINT_DISABLE: '1',
        PRISMA_HIDE_UPDATE_MESSAGE: '1',
      },
    });
    if (!/CREATE TABLE/.test(stdout)) throw new Error(`prisma migrate diff printed no SQL:\n${stdout}`);
    return stdout;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const CATALOG_QUERIES: Record<string, string> = {
  table: `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p') AND c.relname <> '_prisma_migrations'`,
  column: `SELECT c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
                 || CASE WHEN a.attnotnull THEN ' NOT NULL' ELSE ' NULL' END
                 || COALESCE(' DEFAULT ' || pg_get_expr(d.adbin, d.adrelid), '')
                 || CASE WHEN a.attidentity <> '' THEN ' IDENTITY ' || a.attidentity::text ELSE '' END
           FROM pg_attribute a
           JOIN pg_class c ON c.oid = a.attrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
           LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
           WHERE n.nspname = 'public' AND c.relkind = 'r' AND c.relname <> '_prisma_migrations' AND a.attnum > 0 AND NOT a.attisdropped`,
  enum: `SELECT t.typname || ' (' || string_agg(e.enumlabel, ', ' ORDER BY e.enumsortorder) || ')'
         FROM pg_type t JOIN pg_enum e ON e.enumtypid = t.oid JOIN pg_namespace n ON n.oid = t.typnamespace
         WHERE n.nspname = 'public' GROUP BY t.typname`,
  // Primary keys, unique constraints, foreign keys (with ON DELETE / ON UPDATE), checks. NOT NULL
  // constraints (PostgreSQL 18 lists them here too) are already in the column entries.
  constraint: `SELECT t.relname || ' ' || c.conname || ' ' || pg_get_constraintdef(c.oid)
               FROM pg_constraint c JOIN pg_class t ON t.oid = c.conrelid JOIN pg_namespace n ON n.oid = t.relnamespace
               WHERE n.nspname = 'public' AND t.relname <> '_prisma_migrations' AND c.contype <> 'n'`,
  index: `SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename <> '_prisma_migrations'`,
  sequence: `SELECT sequencename || ' ' || data_type FROM pg_sequences WHERE schemaname = 'public'`,
};

/** Every table, column (type, nullability, default), enum, constraint, index and sequence of the public schema. */
export async function readCatalog(databaseUrl: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const entries: string[] = [];
    for (const [kind, sql] of Object.entries(CATALOG_QUERIES)) {
      const { rows } = await client.query<Record<string, string>>(sql);
      for (const row of rows) entries.push(`${kind} ${Object.values(row)[0]}`);
    }
    return entries.sort();
  } finally {
    await client.end();
  }
}

/** What only one side has; empty when the catalogs match. */
export function catalogDiff(expected: string[], actual: string[]): { missing: string[]; unexpected: string[] } {
  const a = new Set(actual);
  const e = new Set(expected);
  return { missing: expected.filter((x) => !a.has(x)), unexpected: actual.filter((x) => !e.has(x)) };
}

export async function runSql(databaseUrl: string, sql: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}
