// Runs `prisma generate` without network access. Prisma 7's client is Rust-free,
// but the CLI still tries to download its native schema engine before it
// generates; pointing PRISMA_SCHEMA_ENGINE_BINARY at any existing file skips
// that download (see shared/ENVIRONMENT.md). Skips when the client is current.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const schema = path.join(root, 'prisma', 'schema.prisma');
const outDir = path.join(root, 'src', 'generated', 'prisma');
const stamp = path.join(outDir, '.schema-hash');
const hash = createHash('sha256').update(readFileSync(schema)).digest('hex');

if (existsSync(stamp) && readFileSync(stamp, 'utf8') === hash) process.exit(0);

execFileSync(path.join(root, 'node_modules', '.bin', 'prisma'), ['generate', '--schema', schema], {
  cwd: root,
  stdio: ['ignore', 'inherit', 'inherit'],
  env: {
    ...process.env,
    PRISMA_SCHEMA_ENGINE_BINARY: process.env.PRISMA_SCHEMA_ENGINE_BINARY ?? process.execPath,
    PRISMA_HIDE_UPDATE_MESSAGE: '1',
    CHECKPOINT_DISABLE: '1',
  },
});
writeFileSync(stamp, hash);
