// The scheduler benchmark (issue 36): schedule() alone, in this process, no
// database and no network. 1,000 live nodes in three zones, 10,000 services
// of 3 replicas (a tenth of them require a zone label). Phases, each timed
// over --runs runs (min / median / max of the schedule() call only):
//   1. full placement: every replica placed from nothing;
//   2. steady state: schedule() on its own result (what every evaluation costs);
//   3. one node lost: its replicas placed elsewhere, nothing else touched;
//   4. one node added: nothing moves.
// Goals: full placement ≤ 2 s, one node's re-placement ≤ 50 ms. Exits 1 when
// a goal or a check is missed. Run from the repository root:
//
//   flock /tmp/tether-heavy.lock pnpm --filter @tether/bench scheduler
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { applyChanges } from '../apps/control-panel/src/scheduling/apply-changes.js';
import { schedule } from '../apps/control-panel/src/scheduling/schedule.js';
import type { Allocation, NodeView, ScheduleResult, ServiceSpec } from '../apps/control-panel/src/scheduling/types.js';

const { values } = parseArgs({
  options: {
    nodes: { type: 'string', default: '1000' },
    services: { type: 'string', default: '10000' },
    replicas: { type: 'string', default: '3' },
    runs: { type: 'string', default: '5' },
  },
});
const NODES = Number(values.nodes);
const SERVICES = Number(values.services);
const REPLICAS = Number(values.replicas);
const RUNS = Number(values.runs);
const ZONES = ['x', 'y', 'z'];
const GOAL_FULL_MS = 2000;
const GOAL_NODE_MS = 50;

const nodes: NodeView[] = Array.from({ length: NODES }, (_, i) => ({
  id: `node-id-${i}`,
  name: `node-${String(i).padStart(4, '0')}`,
  state: 'live',
  cordoned: false,
  decommissioned: false,
  labels: { zone: ZONES[i % ZONES.length]! },
}));
const services: ServiceSpec[] = Array.from({ length: SERVICES }, (_, i) => ({
  id: `svc-${String(i).padStart(5, '0')}`,
  releaseId: `rel-${i}`,
  replicas: REPLICAS,
  placement: i % 10 === 0 ? { labels: { zone: ZONES[i % ZONES.length]! } } : {},
  stateful: false,
}));

let nextId = 0;
function apply(allocations: readonly Allocation[], changes: ScheduleResult): Allocation[] {
  return applyChanges(allocations, changes, () => ({ id: `alloc-${++nextId}`, createdAt: nextId }));
}

function timed(label: string, run: () => ScheduleResult): { result: ScheduleResult; ms: number[] } {
  const ms: number[] = [];
  let result: ScheduleResult | undefined;
  for (let i = 0; i < RUNS; i++) {
    const start = performance.now();
    result = run();
    ms.push(performance.now() - start);
  }
  const sorted = [...ms].sort((a, b) => a - b);
  const median = sorted[Math.floor(sorted.length / 2)]!;
  const r = result!;
  console.log(
    `${label.padEnd(16)} min ${sorted[0]!.toFixed(1).padStart(7)} ms  median ${median.toFixed(1).padStart(7)} ms  max ${sorted.at(-1)!.toFixed(1).padStart(7)} ms` +
      `  place ${r.place.length}  stop ${r.stop.length}  pending ${r.pending.length}`,
  );
  return { result: r, ms: sorted };
}

const failures: string[] = [];
function check(ok: boolean, what: string): void {
  if (!ok) failures.push(what);
}

console.log(`scheduler: ${NODES} nodes, ${SERVICES} services x ${REPLICAS} replicas, ${RUNS} runs each; node ${process.version}, ${os.cpus().length} cores, load ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`);

const full = timed('full placement', () => schedule(services, nodes, []));
check(full.result.place.length === SERVICES * REPLICAS, 'full placement placed every replica');
let allocations = apply([], full.result);
const perNode = new Map<string, number>();
for (const a of allocations) perNode.set(a.nodeId, (perNode.get(a.nodeId) ?? 0) + 1);
const loads = [...perNode.values()];
console.log(`  allocations per node: min ${Math.min(...loads)} max ${Math.max(...loads)}`);

const steady = timed('steady state', () => schedule(services, nodes, allocations));
check(steady.result.place.length + steady.result.stop.length === 0, 'steady state changes nothing');

const victim = nodes[Math.floor(NODES / 2)]!;
const onVictim = allocations.filter((a) => a.nodeId === victim.id).length;
const lostNodes = nodes.map((n) => (n === victim ? { ...n, state: 'lost' as const } : n));
const lost = timed('one node lost', () => schedule(services, lostNodes, allocations));
check(lost.result.stop.length === onVictim && lost.result.place.length === onVictim, `one node lost moves exactly its ${onVictim} allocations`);
check(lost.result.place.every((p) => p.nodeId !== victim.id), 'nothing placed on the lost node');
allocations = apply(allocations, lost.result);

const added = [...lostNodes, { ...victim, id: 'node-id-new', name: 'node-new' }];
const add = timed('one node added', () => schedule(services, added, allocations));
check(add.result.place.length + add.result.stop.length === 0, 'one node added moves nothing');

const fullMedian = full.ms[Math.floor(full.ms.length / 2)]!;
const lostMedian = lost.ms[Math.floor(lost.ms.length / 2)]!;
check(fullMedian <= GOAL_FULL_MS, `full placement median ${fullMedian.toFixed(0)} ms within ${GOAL_FULL_MS} ms`);
check(lostMedian <= GOAL_NODE_MS, `one node's re-placement median ${lostMedian.toFixed(1)} ms within ${GOAL_NODE_MS} ms`);
console.log(`load after: ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}; heap used ${(process.memoryUsage().heapUsed / 2 ** 20).toFixed(0)} MiB`);
if (failures.length > 0) {
  console.log(`MISSED: ${failures.join('; ')}`);
  process.exitCode = 1;
} else {
  console.log(`goals met: full placement ≤ ${GOAL_FULL_MS} ms, one node's re-placement ≤ ${GOAL_NODE_MS} ms; every check passed`);
}
