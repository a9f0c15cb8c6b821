import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAPABILITIES } from '@tether/protocol';
import { freePort, sleep, spawnProcess, startTestPostgres, waitFor, type ManagedProcess, type TestPostgres } from '@tether/testkit';
import { createPrisma, MIGRATIONS_DIR } from '../src/db/database.js';
import { applyMigrations } from '../src/db/migrate.js';
import { generateToken, hashToken } from '../src/domain/tokens.js';
import { RawAgent } from './helpers/raw-agent.js';

// Issue 36, done-when: three panel processes on one PostgreSQL, TETHER_ALLOCATIONS=on, a short scheduler
// lease. The scheduler holder is SIGSTOPped past its lease; another panel takes the lease (epoch above the
// old one, no sooner than the old lease's expiry by PostgreSQL's clock, and within one renewal period of it)
// and places what was asked through a third panel; the old holder is SIGCONTed and its stale-epoch writes
// are refused; every allocation exists exactly once.
//
// What happened is read from the database itself, not from the panels' answers: test-only triggers record
// every row written to scheduler_lease and allocations (and every statement run on scheduler_lease, even one
// that changed no row) with clock_timestamp() and the writer's application_name (each panel connects as its
// own name). The agents are scripted capable agents (workload.allocations; ACK every frame) connected to the
// two panels that are not frozen, so their nodes stay live for the new holder.
//
// The old holder must try a stale write when it wakes, which it does only if it was frozen after deciding
// to evaluate (its lease held on its own clock) and before its fenced write: on waking, its own monotonic
// clock says the lease ran out, so it starts nothing new. The test makes that window wide: every connection
// of the holder's pool is busy with a PATCH the test holds back on a row lock, so its next evaluation waits
// for a connection with the old epoch in hand; then SIGSTOP. Thawed, that evaluation reaches the fence and
// is refused (its log: "... nothing written" with the old epoch) and its lease renewals run and change no row.

const PANEL_MAIN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'main.js');
const OPERATOR = 'scheduler-takeover-operator-token';
const LEASE_MS = 1_200;
const INTERVAL_MS = 150;
/** The lease is renewed (and an expired one taken) every third of it. */
const RENEW_MS = Math.floor(LEASE_MS / 3);
/** Each panel's database pool: the test holds the old holder's back (and the timeouts outlast the freeze). */
const POOL_SIZE = 4;
const env = {
  TETHER_ALLOCATIONS: 'on',
  TETHER_SCHEDULER_LEASE_MS: String(LEASE_MS),
  TETHER_SCHEDULER_INTERVAL_MS: String(INTERVAL_MS),
  TETHER_PANEL_LEASE_MS: '10000',
  TETHER_SESSION_IDLE_MS: '10000',
  TETHER_PING_INTERVAL_MS: '2000',
  TETHER_LOG_LEVEL: 'info',
  TETHER_ADMIN_TOKEN: OPERATOR,
  TETHER_DB_POOL_SIZE: String(POOL_SIZE),
  TETHER_DB_CONNECT_TIMEOUT_MS: '15000',
  TETHER_DB_QUERY_TIMEOUT_MS: '15000',
};

let server: TestPostgres | undefined;
const cleanup: (() => Promise<unknown> | unknown)[] = [];
beforeAll(async () => {
  server = await startTestPostgres();
}, 60_000);
afterAll(async () => {
  for (const f of cleanup.reverse()) await f();
  await server?.stop();
});

interface PanelProc {
  id: string;
  url: string;
  child: ManagedProcess;
}

interface LeaseRow {
  holder: string;
  epoch: string;
  lease_until: string;
  renewed_at: string;
}
interface AllocationRow {
  id: string;
  service_id: string;
  node_id: string;
  desired: string;
  epoch: string;
}
interface Audited<T> {
  seq: number;
  at_ms: number;
  app: string;
  op: string;
  row: T | null;
}

const AUDIT = `
CREATE TABLE test_audit (
  seq bigserial PRIMARY KEY,
  at timestamptz NOT NULL DEFAULT clock_timestamp(),
  app text NOT NULL DEFAULT current_setting('application_name'),
  tbl text NOT NULL, op text NOT NULL, level text NOT NULL, row jsonb);
CREATE FUNCTION test_audit_row() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO test_audit (tbl, op, level, row) VALUES (TG_TABLE_NAME, TG_OP, 'row', to_jsonb(CASE WHEN TG_OP = 'DELETE' THEN OLD ELSE NEW END));
  RETURN NULL; END $$;
CREATE FUNCTION test_audit_statement() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
  INSERT INTO test_audit (tbl, op, level) VALUES (TG_TABLE_NAME, TG_OP, 'statement');
  RETURN NULL; END $$;
CREATE TRIGGER test_audit_lease_row AFTER INSERT OR UPDATE OR DELETE ON scheduler_lease FOR EACH ROW EXECUTE FUNCTION test_audit_row();
CREATE TRIGGER test_audit_lease_statement AFTER UPDATE ON scheduler_lease FOR EACH STATEMENT EXECUTE FUNCTION test_audit_statement();
CREATE TRIGGER test_audit_allocations_row AFTER INSERT OR UPDATE OR DELETE ON allocations FOR EACH ROW EXECUTE FUNCTION test_audit_row();
`;

const ms = (iso: string) => new Date(iso).getTime();
/** A panel's JSON log lines. */
function logLines(panel: PanelProc): { msg?: unknown; epoch?: unknown; time?: unknown }[] {
  return panel.child
    .output()
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .flatMap((line) => {
      try {
        return [JSON.parse(line) as { msg?: unknown; epoch?: unknown; time?: unknown }];
      } catch {
        return [];
      }
    });
}

/**
 * A new database with the audit triggers, three panel processes on it (scheduler lease taken by one), three
 * capable nodes whose sessions are on the two others, and a service of two replicas the holder placed.
 */
async function startCluster() {
  const databaseUrl = await server!.createDatabase();
  await applyMigrations(databaseUrl, MIGRATIONS_DIR);
  const db = { url: databaseUrl, prisma: createPrisma(databaseUrl) };
  cleanup.push(() => db.prisma.$disconnect());
  if (!existsSync(PANEL_MAIN)) throw new Error(`build the panel first: ${PANEL_MAIN} is missing`);
  for (const statement of AUDIT.split(/;\n(?=CREATE)/)) await db.prisma.$executeRawUnsafe(statement);

  // Three panel processes, each connecting to PostgreSQL as its own application_name.
  const panels: PanelProc[] = [];
  for (const id of ['tk-a', 'tk-b', 'tk-c']) {
    const dataDir = await mkdtemp(path.join(os.tmpdir(), 'tether-takeover-'));
    cleanup.push(() => rm(dataDir, { recursive: true, force: true }));
    const port = await freePort();
    const url = new URL(db.url);
    url.searchParams.set('application_name', id);
    const child = spawnProcess(process.execPath, [PANEL_MAIN], {
      env: { ...env, DATABASE_URL: url.toString(), TETHER_DATA_DIR: dataDir, TETHER_PORT: String(port), TETHER_PANEL_ID: id },
    });
    panels.push({ id, url: `http://127.0.0.1:${port}`, child });
  }
  // A frozen child must be thawed before it can be stopped.
  cleanup.push(() => Promise.all(panels.map((p) => (p.child.child.kill('SIGCONT'), p.child.stop(3_000)))));
  await Promise.all(panels.map((p) => p.child.waitForOutput(/listening on /, 30_000)));
  const byId = (id: string) => panels.find((p) => p.id === id)!;
  const diagnostics = () => panels.map((p) => `--- ${p.id}:\n${p.child.output().slice(-3_000)}`).join('\n');

  const api = async (panel: PanelProc, method: string, url: string, body?: unknown) => {
    const res = await fetch(`${panel.url}${url}`, {
      method,
      headers: { authorization: `Bearer ${OPERATOR}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : null) as Record<string, unknown> & { id: string } };
  };
  const lease = async () => (await db.prisma.$queryRawUnsafe<LeaseRow[]>(`SELECT holder, epoch::text, lease_until::text, renewed_at::text FROM scheduler_lease WHERE id = 1`))[0];
  const runAllocations = (serviceId: string) =>
    db.prisma.$queryRawUnsafe<AllocationRow[]>(`SELECT id, service_id, node_id, desired, epoch::text FROM allocations WHERE service_id = $1 AND desired = 'run'`, serviceId);
  const audit = async <T,>(tbl: string, level = 'row') =>
    db.prisma.$queryRawUnsafe<Audited<T>[]>(
      `SELECT seq::int, (extract(epoch FROM at) * 1000)::float8 AS at_ms, app, op, row FROM test_audit WHERE tbl = $1 AND level = $2 ORDER BY seq`,
      tbl,
      level,
    );

  // The holder: one panel takes the lease at start.
  const first = await waitFor(lease, { timeoutMs: 10_000, message: 'a scheduler lease holder' });
  const holder = byId(first.holder);
  const others = panels.filter((p) => p !== holder);
  const oldEpoch = Number(first.epoch);
  console.log(`holder ${holder.id} under epoch ${oldEpoch}; others ${others.map((p) => p.id).join(', ')}`);

  // Three capable nodes, their sessions on the two panels that will stay up.
  const nodes: { id: string; name: string }[] = [];
  for (let i = 0; i < 3; i++) {
    const token = generateToken('node');
    const node = await db.prisma.node.create({ data: { name: `tk-node-${i}`, tokenHash: hashToken(token) } });
    nodes.push({ id: node.id, name: node.name });
    const agent = await RawAgent.connect({ url: others[i % 2]!.url, token, node: node.name, capabilities: [CAPABILITIES.WORKLOAD_ALLOCATIONS], heartbeatMs: 1_000 });
    cleanup.push(() => agent.close());
  }
  await waitFor(
    async () =>
      (await db.prisma.$queryRawUnsafe<{ n: number }[]>(
        `SELECT count(*)::int AS n FROM node_reports r JOIN node_owners w ON w.node_id = r.node_id AND w.generation = r.generation
          JOIN nodes n ON n.id = r.node_id
        WHERE r.state = 'connected' AND $1 = ANY(n.capabilities)`,
        CAPABILITIES.WORKLOAD_ALLOCATIONS,
      ))[0]?.n === 3,
    { timeoutMs: 10_000, message: 'three capable nodes connected' },
  );

  // Before the freeze: a service of two replicas placed by the holder under the old epoch.
  const team = await api(others[0]!, 'POST', '/v1/teams', { name: 'takeover' });
  expect(team.status).toBe(201);
  const early = await api(others[0]!, 'POST', '/v1/services', { teamId: team.body.id, name: 'early', image: 'tether-test/busybox:1', internalPort: 8080, replicas: 2 });
  expect(early.status, JSON.stringify(early.body)).toBe(201);
  const earlyPlaced = await waitFor(async () => ((await runAllocations(early.body.id)).length === 2 ? runAllocations(early.body.id) : undefined), {
    timeoutMs: 5_000,
    message: `the holder placed the early service\n${diagnostics()}`,
  });
  expect(earlyPlaced.every((a) => Number(a.epoch) === oldEpoch)).toBe(true);

  /** The lease row once a panel other than the first holder has it. */
  const takenOver = () =>
    waitFor(
      async () => {
        const row = await lease();
        return row && row.holder !== holder.id ? row : undefined;
      },
      { timeoutMs: LEASE_MS * 4, intervalMs: 20, message: `another panel took the scheduler lease\n${diagnostics()}` },
    );

  return { db, panels, holder, others, oldEpoch, nodes, team, early, earlyPlaced, api, lease, takenOver, runAllocations, audit, diagnostics };
}

describe('scheduler takeover among three panel processes', () => {
  it('the holder frozen past its lease: another takes over and places; the old one, thawed, writes nothing; every allocation once', async () => {
    const { db, holder, others, oldEpoch, nodes, team, early, earlyPlaced, api, lease, takenOver, runAllocations, audit, diagnostics } = await startCluster();

    // Freeze the holder while it is between deciding to evaluate (its lease held on its own clock) and its
    // fenced write: every connection of its pool busy with a PATCH the test holds back on a row lock, so its
    // next evaluation waits for a connection before the fence. Frozen there, it has no transaction open (a
    // holder frozen inside its fenced write holds the lease row FOR SHARE and a takeover waits for it).
    const dummy = await db.prisma.node.create({ data: { name: 'tk-dummy', tokenHash: hashToken(generateToken('node')) } });
    const parked = await db.prisma.service.create({ data: { teamId: team.body.id, name: 'parked', image: 'tether-test/busybox:1', internalPort: 8080, replicas: 1, nodeId: dummy.id } });
    const blocker = new pg.Client({ connectionString: db.url });
    await blocker.connect();
    cleanup.push(() => blocker.end());
    await blocker.query('BEGIN');
    await blocker.query('SELECT 1 FROM services WHERE id = $1 FOR NO KEY UPDATE', [parked.id]);
    const heldBack = Array.from({ length: POOL_SIZE }, () => api(holder, 'PATCH', `/v1/services/${parked.id}`, { replicas: 1 }));
    await waitFor(
      async () =>
        (await db.prisma.$queryRawUnsafe<{ n: number }[]>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND wait_event_type = 'Lock'`, holder.id))[0]!.n ===
        POOL_SIZE,
      { timeoutMs: 5_000, message: `the holder's pool held back\n${diagnostics()}` },
    );
    // Its lease stays held on its own clock for at least two thirds of the lease after its last renewal; an
    // evaluation starts within two intervals and waits for a connection.
    await sleep(INTERVAL_MS * 2);
    holder.child.child.kill('SIGSTOP');
    await sleep(30);
    const open = await db.prisma.$queryRawUnsafe<{ n: number }[]>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1 AND state LIKE 'idle in transaction%'`, holder.id);
    expect(open[0]!.n).toBe(0);
    const frozenAt = Date.now();
    const frozenLease = (await lease())!;
    expect(frozenLease.holder).toBe(holder.id);

    // While it is frozen, through the other panels: a new service of 3 replicas and the early one scaled to 3.
    const late = await api(others[0]!, 'POST', '/v1/services', { teamId: team.body.id, name: 'late', image: 'tether-test/busybox:1', internalPort: 8080, replicas: 3 });
    expect(late.status, JSON.stringify(late.body)).toBe(201);
    const scaled = await api(others[1]!, 'PATCH', `/v1/services/${early.body.id}`, { replicas: 3 });
    expect(scaled.status, JSON.stringify(scaled.body)).toBe(200);

    const taken = await takenOver();
    const newEpoch = Number(taken.epoch);
    const newHolder = taken.holder;
    expect(others.map((p) => p.id)).toContain(newHolder);
    expect(newEpoch).toBeGreaterThan(oldEpoch);
    const placedAt = await waitFor(
      async () => {
        const [a, b] = await Promise.all([runAllocations(late.body.id), runAllocations(early.body.id)]);
        return a.length === 3 && b.length === 3 ? Date.now() : undefined;
      },
      { timeoutMs: 5_000, intervalMs: 20, message: `the new holder placed the replicas\n${diagnostics()}` },
    );

    // Thaw the old holder (its held-back PATCHes go on first); give it several of its renewal and evaluation periods.
    await blocker.query('ROLLBACK');
    holder.child.child.kill('SIGCONT');
    const thawedAt = Date.now();
    for (const answer of await Promise.all(heldBack)) expect(answer.status).toBe(200);
    // The evaluation it had started under the old epoch reaches the fence now and is refused: nothing written.
    await holder.child.waitForOutput(/nothing written/, 5_000);
    await sleep(LEASE_MS * 2);
    // A panel that lost the lease keeps nudging the holder; the new holder is still the holder, same epoch.
    const after = (await lease())!;
    expect(after.holder).toBe(newHolder);
    expect(Number(after.epoch)).toBe(newEpoch);

    // The lease's history by PostgreSQL's clock: the old holder's last renewal before the takeover, the takeover.
    const leaseRows = await audit<LeaseRow & { epoch: number }>('scheduler_lease');
    const takeover = leaseRows.find((r) => Number(r.row!.epoch) === newEpoch)!;
    expect(takeover.app).toBe(newHolder);
    const lastOld = leaseRows.filter((r) => r.seq < takeover.seq).at(-1)!;
    expect(lastOld.app).toBe(holder.id);
    expect(Number(lastOld.row!.epoch)).toBe(oldEpoch);
    const oldUntil = ms(lastOld.row!.lease_until);
    const oldRenewed = ms(lastOld.row!.renewed_at);
    const takenAt = ms(takeover.row!.renewed_at);
    // No sooner than the old lease's expiry (the statement's now() is past lease_until) ...
    expect(takenAt).toBeGreaterThanOrEqual(oldUntil);
    expect(takenAt - oldRenewed).toBeGreaterThanOrEqual(LEASE_MS);
    // ... and no later than one renewal period of another panel after it (plus scheduling slack on a loaded machine).
    expect(takenAt - oldUntil).toBeLessThanOrEqual(RENEW_MS + 600);
    // Nothing of the old holder's reached the lease row after the takeover; its renewals after the thaw ran and changed nothing.
    expect(leaseRows.filter((r) => r.seq > takeover.seq && r.app === holder.id)).toEqual([]);
    const statements = await audit<null>('scheduler_lease', 'statement');
    const refusedRenewals = statements.filter((s) => s.app === holder.id && s.at_ms > takeover.at_ms);
    expect(refusedRenewals.length, 'the thawed holder tried to renew its lease').toBeGreaterThan(0);

    // Allocation writes: the old epoch wrote nothing after the takeover, the old holder nothing at all after it.
    const allocationRows = await audit<AllocationRow>('allocations');
    const afterTakeover = allocationRows.filter((r) => r.at_ms >= takeover.at_ms);
    expect(afterTakeover.filter((r) => r.app === holder.id)).toEqual([]);
    // (A status an agent reports updates a row and keeps its epoch; a placement after the takeover is the new epoch's.)
    expect(afterTakeover.filter((r) => r.op === 'INSERT' && Number(r.row!.epoch) !== newEpoch)).toEqual([]);
    expect(afterTakeover.filter((r) => r.op === 'DELETE')).toEqual([]);
    for (const r of allocationRows) expect(Number(r.row!.epoch)).toBeLessThanOrEqual(newEpoch);
    const inserts = allocationRows.filter((r) => r.op === 'INSERT');
    expect(inserts.filter((r) => Number(r.row!.epoch) === oldEpoch).every((r) => r.app === holder.id && r.at_ms < takeover.at_ms)).toBe(true);
    expect(inserts.filter((r) => Number(r.row!.epoch) === newEpoch).every((r) => r.app === newHolder && r.at_ms >= takeover.at_ms)).toBe(true);

    // Every allocation once: 3 replicas of each service, one per node, no row twice, nothing else.
    const all = await db.prisma.$queryRawUnsafe<AllocationRow[]>(`SELECT id, service_id, node_id, desired, epoch::text FROM allocations ORDER BY service_id, node_id`);
    expect(all).toHaveLength(6);
    expect(new Set(all.map((a) => a.id)).size).toBe(6);
    for (const serviceId of [early.body.id, late.body.id]) {
      const mine = all.filter((a) => a.service_id === serviceId);
      expect(mine.map((a) => a.desired)).toEqual(['run', 'run', 'run']);
      expect(mine.map((a) => a.node_id).sort()).toEqual(nodes.map((n) => n.id).sort());
    }
    // The early replicas kept their rows and epoch; the third and the late service's three are the new epoch's.
    expect(all.filter((a) => Number(a.epoch) === oldEpoch).map((a) => a.id).sort()).toEqual(earlyPlaced.map((a) => a.id).sort());
    expect(all.filter((a) => Number(a.epoch) === newEpoch)).toHaveLength(4);
    expect(inserts).toHaveLength(6);

    // The thawed holder's own account of its refused write: the epoch it had decided under, the old one.
    const refusedWrites = logLines(holder).filter((l) => typeof l.msg === 'string' && l.msg.includes('nothing written'));
    expect(refusedWrites.length).toBeGreaterThan(0);
    for (const l of refusedWrites) {
      expect(l.epoch).toBe(oldEpoch);
      expect(Number(l.time)).toBeGreaterThanOrEqual(takeover.at_ms);
    }
    const staleWrites = refusedWrites.length;
    console.log(
      `scheduler takeover: holder ${holder.id} epoch ${oldEpoch} frozen ${frozenAt - oldRenewed} ms after its last renewal at ${lastOld.row!.renewed_at}, lease until ${lastOld.row!.lease_until}; ` +
        `${newHolder} took epoch ${newEpoch} at ${takeover.row!.renewed_at}: ${takenAt - oldRenewed} ms after the last renewal (lease ${LEASE_MS} ms), ${takenAt - oldUntil} ms after expiry, ` +
        `${takenAt - frozenAt} ms after the freeze; 6 replicas placed ${placedAt - frozenAt} ms after the freeze; thawed at +${thawedAt - frozenAt} ms: ` +
        `${refusedRenewals.length} refused lease statements, ${staleWrites} refused evaluation writes logged, 0 rows written`,
    );
  }, 90_000);

  // Found writing this file: a holder frozen INSIDE its fenced write transaction kept the lease row locked FOR
  // SHARE while it was frozen. Nothing ended that transaction on the server (statement_timeout does not apply to
  // an idle transaction, the transaction timeout is Prisma's, in the frozen process), so every other panel's
  // takeover waited behind the lock and nothing was placed for as long as the holder stayed frozen (6.2 s, 5
  // leases, in the probe). The fenced write now sets idle_in_transaction_session_timeout to half a lease.
  it('the holder frozen inside its fenced write: another panel still takes over within a renewal period of the expiry', async () => {
    const { db, holder, others, team, api, lease, runAllocations, diagnostics } = await startCluster();
    // The holder's next evaluation is held inside its fenced transaction (after the fence) by a table lock on
    // what it reads last; frozen there, the lock is released: its transaction sits idle, lease row FOR SHARE.
    const blocker = new pg.Client({ connectionString: db.url });
    await blocker.connect();
    cleanup.push(() => blocker.end());
    await blocker.query('BEGIN');
    await blocker.query('LOCK TABLE deployments IN ACCESS EXCLUSIVE MODE');
    const fenceHeld = `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_stat_activity a USING (pid)
      WHERE a.application_name = $1 AND l.relation = 'scheduler_lease'::regclass AND l.mode = 'RowShareLock' AND l.granted`;
    await waitFor(async () => (await db.prisma.$queryRawUnsafe<{ n: number }[]>(fenceHeld, holder.id))[0]!.n > 0, {
      timeoutMs: 5_000,
      message: 'the holder inside its fenced write',
    });
    holder.child.child.kill('SIGSTOP');
    await blocker.query('ROLLBACK');
    const frozenLease = (await lease())!;
    expect(frozenLease.holder).toBe(holder.id);
    const late = await api(others[0]!, 'POST', '/v1/services', { teamId: team.body.id, name: 'late', image: 'tether-test/busybox:1', internalPort: 8080, replicas: 3 });
    expect(late.status, JSON.stringify(late.body)).toBe(201);
    const expiry = ms(frozenLease.lease_until);
    const waiting = () =>
      db.prisma.$queryRawUnsafe(
        `SELECT application_name, state, wait_event_type, left(query, 60) AS query FROM pg_stat_activity
        WHERE application_name LIKE 'tk-%' AND (wait_event_type = 'Lock' OR state LIKE 'idle in transaction%')`,
      );
    try {
      await waitFor(
        async () => {
          const row = await lease();
          return row && row.holder !== holder.id ? row : undefined;
        },
        { timeoutMs: Math.max(0, expiry - Date.now()) + RENEW_MS + 1_500, intervalMs: 20 },
      );
    } catch {
      throw new Error(`no other panel took the scheduler lease ${RENEW_MS + 1_500} ms past its expiry; in the database: ${JSON.stringify(await waiting())}\n${diagnostics()}`);
    }
    await waitFor(async () => ((await runAllocations(late.body.id)).length === 3 ? true : undefined), { timeoutMs: 3_000, message: 'the late service placed' });
  }, 90_000);

  // Issue 38, done-when: the holder frozen while a node is evacuated, then thawed: each replica placed once.
  it('the holder frozen while a node is evacuated: another panel makes the move, the thawed one nothing; each replica placed once', async () => {
    const { db, holder, others, oldEpoch, nodes, early, earlyPlaced, api, lease, takenOver, audit, diagnostics } = await startCluster();
    const evacuated = earlyPlaced[0]!.node_id;
    const idle = nodes.find((n) => !earlyPlaced.some((a) => a.node_id === n.id))!;
    holder.child.child.kill('SIGSTOP');
    const frozenAt = Date.now();
    // Through another panel: the node cordoned and evacuating; the answer names the move to the idle node.
    const evacuate = await api(others[0]!, 'POST', `/v1/nodes/${evacuated}/evacuate`);
    expect(evacuate.status, JSON.stringify(evacuate.body)).toBe(200);
    const moves = evacuate.body.moves as { serviceId: string; allocationId: string; to: string }[];
    expect(moves).toEqual([expect.objectContaining({ serviceId: early.body.id, allocationId: earlyPlaced[0]!.id, to: idle.name })]);

    const taken = await takenOver();
    const newEpoch = Number(taken.epoch);
    expect(newEpoch).toBeGreaterThan(oldEpoch);
    const moved = await waitFor(
      async () => {
        const rows = await db.prisma.$queryRawUnsafe<AllocationRow[]>(`SELECT id, service_id, node_id, desired, epoch::text FROM allocations WHERE service_id = $1 AND node_id = $2`, early.body.id, idle.id);
        return rows.length > 0 ? rows : undefined;
      },
      { timeoutMs: 5_000, intervalMs: 20, message: `the new holder placed the evacuation's move\n${diagnostics()}` },
    );
    expect(moved.map((a) => Number(a.epoch))).toEqual([newEpoch]);

    // Thawed: several of its renewal and evaluation periods; it decides nothing under its old epoch.
    holder.child.child.kill('SIGCONT');
    const thawedAt = Date.now();
    await sleep(LEASE_MS * 2);
    expect((await lease())!).toMatchObject({ holder: taken.holder, epoch: String(newEpoch) });

    const leaseRows = await audit<LeaseRow>('scheduler_lease');
    const takeover = leaseRows.find((r) => Number(r.row!.epoch) === newEpoch)!;
    const inserts = (await audit<AllocationRow>('allocations')).filter((r) => r.op === 'INSERT');
    // Three placements in all: the two early replicas (old holder, old epoch) and the one move (new holder, new epoch).
    expect(inserts.map((r) => [r.app, Number(r.row!.epoch), r.row!.node_id])).toEqual([
      [holder.id, oldEpoch, expect.any(String)],
      [holder.id, oldEpoch, expect.any(String)],
      [taken.holder, newEpoch, idle.id],
    ]);
    expect(inserts.filter((r) => r.app === holder.id && r.at_ms >= takeover.at_ms)).toEqual([]);
    // The move completed by the new holder alone: the evacuated replica marked to stop, by it, once; two run.
    const rows = await db.prisma.$queryRawUnsafe<AllocationRow[]>(`SELECT id, service_id, node_id, desired, epoch::text FROM allocations WHERE service_id = $1`, early.body.id);
    expect(rows.filter((a) => a.desired === 'run').map((a) => a.node_id).sort()).toEqual([earlyPlaced[1]!.node_id, idle.id].sort());
    expect(rows.find((a) => a.id === earlyPlaced[0]!.id)?.desired).toBe('stop');
    const stops = (await audit<AllocationRow>('allocations')).filter((r) => r.op === 'UPDATE' && r.row!.id === earlyPlaced[0]!.id && r.row!.desired === 'stop');
    // (A later status write by the panel holding the agent's session may repeat the row; the stop itself is the new holder's.)
    expect(stops[0]?.app).toBe(taken.holder);
    expect(stops.filter((r) => r.app === holder.id)).toEqual([]);
    console.log(`evacuation under a frozen holder: ${taken.holder} took epoch ${newEpoch} ${ms(takeover.row!.renewed_at) - frozenAt} ms after the freeze; move placed; thawed at +${thawedAt - frozenAt} ms, ${inserts.length} placements in all`);
  }, 90_000);
});
