// What one evaluation of the scheduler costs the panel holding its lease when
// nothing changed (issue 36): its reads (readState: the managed services,
// every node with its liveness, their allocations and deployments) and the
// pure decision on them (evaluate()), on an embedded PostgreSQL in this
// process. N live nodes whose agents speak allocations, S services of R
// replicas spread over them, each running its one deployment. Each size is
// timed over --runs evaluations (min / median / max); nothing is written (a
// steady fleet's plan is empty). Run from the repository root:
//
//   flock /tmp/tether-heavy.lock pnpm --filter @tether/bench scheduler-reads
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { startEmbeddedPostgres } from '@tether/embedded-postgres';
import { createPrisma, MIGRATIONS_DIR } from '../apps/control-panel/src/db/database.js';
import { applyMigrations } from '../apps/control-panel/src/db/migrate.js';
import { readState } from '../apps/control-panel/src/cluster/scheduler-reads.js';
import { evaluate, isEmptyPlan } from '../apps/control-panel/src/scheduling/evaluation.js';

const { values } = parseArgs({
  options: {
    nodes: { type: 'string', default: '1000,10000' },
    services: { type: 'string', default: '10000' },
    replicas: { type: 'string', default: '3' },
    runs: { type: 'string', default: '7' },
  },
});
const SIZES = values.nodes.split(',').map(Number);
const SERVICES = Number(values.services);
const REPLICAS = Number(values.replicas);
const RUNS = Number(values.runs);

const stats = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return `${s[0]!.toFixed(1)} / ${s[Math.floor(s.length / 2)]!.toFixed(1)} / ${s[s.length - 1]!.toFixed(1)} ms`;
};

const dir = await mkdtemp(path.join(os.tmpdir(), 'tether-bench-'));
const db = await startEmbeddedPostgres({ dataDir: path.join(dir, 'pg'), persistent: false });
try {
  console.log(`scheduler reads: ${SERVICES} services × ${REPLICAS}, ${RUNS} runs each; cpus ${os.cpus().length}, load ${os.loadavg()[0]!.toFixed(2)}`);
  console.log('| live nodes | readState (min / median / max) | readState + evaluate |');
  console.log('|---|---|---|');
  for (const nodes of SIZES) {
    const url = await db.createDatabase(`sched_${nodes}`);
    await applyMigrations(url, MIGRATIONS_DIR);
    const prisma = createPrisma(url);
    try {
      const sql = (text: string, ...v: unknown[]) => prisma.$executeRawUnsafe(text, ...v);
      await sql(`INSERT INTO panels (id, lease_until, renewed_at) VALUES ('owner', now() + interval '1 hour', now())`);
      await sql(`INSERT INTO teams (id, name) VALUES ('t', 't')`);
      await sql(`INSERT INTO nodes (id, name, token_hash, capabilities) SELECT 'n' || g, 'node-' || g, 'h' || g, ARRAY['workload.allocations'] FROM generate_series(0, $1::int - 1) g`, nodes);
      await sql(`INSERT INTO node_owners (node_id, panel_id, session_id, generation, claimed_at) SELECT id, 'owner', 's-' || id, 1, now() FROM nodes`);
      await sql(`INSERT INTO node_reports (node_id, panel_id, session_id, generation, state, last_frame_at, report, updated_at) SELECT id, 'owner', 's-' || id, 1, 'connected', now(), '{}', now() FROM nodes`);
      await sql(`INSERT INTO services (id, team_id, name, image, node_id, replicas, updated_at) SELECT 's' || g, 't', 's' || g, 'nginx', 'n' || (g % $2::int), $3::int, now() FROM generate_series(0, $1::int - 1) g`, SERVICES, nodes, REPLICAS);
      await sql(`INSERT INTO deployments (id, service_id, node_id, spec, status, running_at) SELECT 'd' || id, id, node_id, '{}', 'running', now() FROM services`);
      // One replica per node, each service's replicas on consecutive nodes, running their release healthy.
      await sql(
        `INSERT INTO allocations (id, service_id, node_id, release_id, cause, epoch, status, status_at, status_session)
        SELECT 'a' || g || '-' || r, 's' || g, 'n' || ((g * $3::int + r) % $2::int), 'ds' || g, 'scale-up', 1,
          json_build_object('state', 'running', 'runningDeploymentId', 'ds' || g, 'health', 'healthy'), now(), 's-n' || ((g * $3::int + r) % $2::int)
        FROM generate_series(0, $1::int - 1) g, generate_series(0, $3::int - 1) r`,
        SERVICES,
        nodes,
        REPLICAS,
      );
      await sql('ANALYZE');
      const reads: number[] = [];
      const whole: number[] = [];
      for (let i = 0; i < RUNS; i++) {
        const t0 = performance.now();
        const input = await prisma.$transaction((tx) => readState(tx, () => false));
        const t1 = performance.now();
        const plan = evaluate({ ...input, progressDeadlineMs: 600_000, movedAt: new Map(), progressAt: new Map(), newId: () => 'x' });
        const t2 = performance.now();
        if (!isEmptyPlan(plan)) throw new Error(`a steady fleet planned something: ${plan.insert.length} placed, ${plan.stop.length} stopped, ${plan.moves.length} moves`);
        reads.push(t1 - t0);
        whole.push(t2 - t0);
      }
      console.log(`| ${nodes.toLocaleString('en')} | ${stats(reads)} | ${stats(whole)} |`);
    } finally {
      await prisma.$disconnect();
    }
  }
} finally {
  await db.stop();
  await rm(dir, { recursive: true, force: true });
}
