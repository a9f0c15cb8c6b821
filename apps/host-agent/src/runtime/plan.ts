import { backoffDelay } from '@tether/common';
import { rollsOutWithoutOverlap, type Workload } from '@tether/protocol';
import type { EngineState, HealthState } from './container-runtime.js';
import { RUNTIME_ERROR_CODES } from './errors.js';
import type { PortBinding } from './published-port.js';

// Reconciliation as a pure function: what the panel wants (desired) and what
// Docker has (actual) in, the steps that close the gap out. No I/O, no clock:
// the caller passes `now`, so every case is a table test.

/** A container of this node as the engine reports it, with its Tether identity. */
export interface ActualContainer {
  id: string;
  name: string;
  serviceId: string;
  deploymentId: string;
  replica: number | null;
  state: EngineState;
  exitCode: number | null;
  health: HealthState;
  /** Epoch ms. */
  createdAt: number;
  startedAt: number | null;
  finishedAt: number | null;
  /** Its last exit was the kernel's OOM kill (memory limit). */
  oomKilled?: boolean;
  /** Its `tether.allocation` label (capability workload.allocations); absent on containers placed by deploy/workloads. */
  allocationId?: string;
  /** Its `tether.fence` label (capability workload.fence): stopped while the agent hears no panel. */
  fenced?: true;
  /** Ports it publishes on the host now (routing.remote); absent when none. */
  ports?: readonly PortBinding[];
}

export type RemoveReason = 'not-desired' | 'duplicate' | 'scale-down' | 'orphan';

export type Action =
  /** Create (and start) the missing replica slots of the desired deployment; nothing to retire. */
  | { kind: 'create'; serviceId: string; workload: Workload; replicas: number[] }
  /**
   * Roll out a new deployment: create `replicas`, bring `keep` (its containers
   * already there) up, and only when all are ready retire `retire`. Without
   * `overlap` (a writable volume or a fenced release: two containers must never run at once)
   * `retire` is stopped first, and started again if the new ones fail.
   */
  | { kind: 'replace'; serviceId: string; workload: Workload; replicas: number[]; keep: ActualContainer[]; retire: ActualContainer[]; overlap: boolean }
  /** Start a crashed container again; `attempt` counts against the restart budget. */
  | { kind: 'restart'; serviceId: string; container: ActualContainer; attempt: number }
  /** Start a container that was created but never started (e.g. the agent died in between). */
  | { kind: 'start'; serviceId: string; container: ActualContainer }
  /** A crashed container whose next restart is held back by backoff until `until`. */
  | { kind: 'wait'; serviceId: string; container: ActualContainer; until: number }
  | { kind: 'remove'; serviceId: string; container: ActualContainer; reason: RemoveReason }
  /** Crashed past the restart budget: left as it is (observe shows it) and reported once. */
  | { kind: 'fail-deployment'; serviceId: string; container: ActualContainer; code: string; reason: string };

export interface PlanContext {
  now: number;
  restartBudget: number;
  restartBackoff: { initialMs: number; maxMs: number };
  /** Restarts already spent per container id (against the budget). */
  restarts: ReadonlyMap<string, number>;
  /** Containers whose exhausted budget was already reported. */
  reported: ReadonlySet<string>;
  /**
   * Deployments never to roll out again on this node: failed ones (retrying
   * would fail the same way) and superseded ones (a late, stale desired set
   * must not roll a service back). Their service keeps what it runs.
   */
  held: ReadonlySet<string>;
  /**
   * Containers of a drain in progress (drainer.ts): they belong to their drain, which stops and removes them
   * at its deadline; a plan neither keeps them alive, nor removes, nor retires them again. Absent: none.
   */
  draining?: ReadonlySet<string>;
}

/** Delay before restart number `attempt` (1-based): initial, doubling, capped. */
export function restartDelay(attempt: number, backoff: PlanContext['restartBackoff']): number {
  // No jitter: a plan is a pure function of its inputs, and one host's restarts need no spreading.
  return backoffDelay(attempt - 1, { ...backoff, jitter: 0 });
}

// Which container keeps a replica slot when there are several: the one that serves, then the newest.
const RANK: Record<EngineState, number> = { running: 0, restarting: 1, paused: 2, created: 3, exited: 4, dead: 5, removing: 6 };
const better = (a: ActualContainer, b: ActualContainer) => RANK[a.state] - RANK[b.state] || b.createdAt - a.createdAt || (a.id < b.id ? -1 : 1);

/** Keep-alive for one container that should exist: start, restart, wait or report, or nothing when it runs. */
function keepAlive(c: ActualContainer, ctx: PlanContext): Action[] {
  if (c.state === 'created') return [{ kind: 'start', serviceId: c.serviceId, container: c }];
  if (c.state !== 'exited' && c.state !== 'dead') return [];
  const spent = ctx.restarts.get(c.id) ?? 0;
  if (spent >= ctx.restartBudget) {
    if (ctx.reported.has(c.id)) return [];
    const code = c.exitCode === null ? 'without an exit code' : `with code ${c.exitCode}`;
    const oom = c.oomKilled === true;
    const reason = `exited ${code}${oom ? ' (killed: out of memory)' : ''}; restart budget of ${ctx.restartBudget} used up`;
    const failure = oom ? RUNTIME_ERROR_CODES.OOM_KILLED : RUNTIME_ERROR_CODES.CONTAINER_EXITED;
    return [{ kind: 'fail-deployment', serviceId: c.serviceId, container: c, code: failure, reason }];
  }
  const attempt = spent + 1;
  const until = (c.finishedAt ?? ctx.now) + restartDelay(attempt, ctx.restartBackoff);
  if (until > ctx.now) return [{ kind: 'wait', serviceId: c.serviceId, container: c, until }];
  return [{ kind: 'restart', serviceId: c.serviceId, container: c, attempt }];
}

function planService(serviceId: string, workload: Workload | undefined, containers: ActualContainer[], ctx: PlanContext): Action[] {
  if (!workload) return containers.map((container) => ({ kind: 'remove', serviceId, container, reason: 'not-desired' }));
  const current = containers.filter((c) => c.deploymentId === workload.deploymentId);
  const others = containers.filter((c) => c.deploymentId !== workload.deploymentId);
  if (ctx.held.has(workload.deploymentId)) {
    // Keep serving whatever ran before; leftovers of the held deployment go.
    return [
      ...current.map((container): Action => ({ kind: 'remove', serviceId, container, reason: 'orphan' })),
      ...others.flatMap((c) => keepAlive(c, ctx)),
    ];
  }
  const removals: Action[] = [];
  const keepers: ActualContainer[] = [];
  const missing: number[] = [];
  for (let slot = 0; slot < workload.replicas; slot++) {
    const [keeper, ...extra] = current.filter((c) => c.replica === slot).sort(better);
    if (keeper) keepers.push(keeper);
    else missing.push(slot);
    for (const container of extra) removals.push({ kind: 'remove', serviceId, container, reason: 'duplicate' });
  }
  for (const container of current) {
    if (container.replica === null) removals.push({ kind: 'remove', serviceId, container, reason: 'orphan' });
    else if (container.replica >= workload.replicas) removals.push({ kind: 'remove', serviceId, container, reason: 'scale-down' });
  }
  if (others.length > 0) {
    const overlap = !rollsOutWithoutOverlap(workload);
    return [...removals, { kind: 'replace', serviceId, workload, replicas: missing, keep: keepers, retire: others.sort(better), overlap }];
  }
  const create: Action[] = missing.length > 0 ? [{ kind: 'create', serviceId, workload, replicas: missing }] : [];
  return [...removals, ...keepers.flatMap((c) => keepAlive(c, ctx)), ...create];
}

/**
 * The actions that turn `actual` into `desired`, ordered by service id.
 * `desired` null means "not known yet" (the agent started and the panel has
 * not spoken): keep what runs alive, create and remove nothing.
 */
export function plan(desired: ReadonlyMap<string, Workload> | null, actual: readonly ActualContainer[], ctx: PlanContext): Action[] {
  const byService = new Map<string, ActualContainer[]>();
  const draining = ctx.draining ?? new Set<string>();
  for (const c of actual) if (!draining.has(c.id)) byService.set(c.serviceId, [...(byService.get(c.serviceId) ?? []), c]);
  if (desired === null) {
    return [...byService.keys()].sort().flatMap((id) => (byService.get(id) ?? []).flatMap((c) => keepAlive(c, ctx)));
  }
  const services = [...new Set([...desired.keys(), ...byService.keys()])].sort();
  return services.flatMap((id) => planService(id, desired.get(id), byService.get(id) ?? [], ctx));
}
