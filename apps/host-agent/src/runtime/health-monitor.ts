import { errorMessage, type Logger } from '@tether/common';
import type { ContainerState, ProbeEvidence, Workload, WorkloadHealthCheck } from '@tether/protocol';
import type { ReadContainer } from './container-reader.js';
import type { ActualContainer } from './plan.js';
import { evidenceOf, probeHttp } from './http-probe.js';

// The HTTP health checks of running containers (capability
// `workload.healthCheck`), probed by the agent from outside the container at
// its address on Tether's network. One timer per checked container; the
// verdict follows the thresholds:
// - `starting` until `healthyThreshold` passes in a row; failures inside
//   `startPeriodSeconds` (from the first sighting of this start) do not count;
// - `unhealthy` after `unhealthyThreshold` failures in a row;
// - `healthy` again after `healthyThreshold` passes in a row.
// The verdict is what heartbeats report as `health` (with `lastProbe`), what a
// rollout waits for, and what the static proxy's answers leave out.

export type CheckVerdict = 'starting' | 'healthy' | 'unhealthy';

export interface CheckView {
  verdict: CheckVerdict;
  lastProbe: ProbeEvidence | null;
}

interface Tracked {
  serviceId: string;
  check: WorkloadHealthCheck;
  /** The container's address on Tether's network (null until it has one). */
  host: string | null;
  /** Docker's StartedAt of the start being checked: another start begins again at `starting`. */
  startedAt: string | null;
  /** Agent clock when this start was first seen, for the start period. */
  seenAt: number;
  passes: number;
  failures: number;
  verdict: CheckVerdict;
  last: ProbeEvidence | null;
  timer: NodeJS.Timeout | null;
}

export interface TrackInput {
  serviceId: string;
  check: WorkloadHealthCheck;
  host: string | null;
  startedAt: string | null;
}

export class HealthMonitor {
  private readonly tracked = new Map<string, Tracked>();
  /**
   * Containers a rollout is starting, not tracked yet (hold): from its start
   * until its first tracking a new container is running on Tether's network
   * with its service's label, and a refresh of the proxy's answers in that
   * window sent customers to a container still warming up.
   */
  private readonly held = new Set<string>();
  /**
   * Checked containers the last pass saw stopped (crashed, fenced, created): whoever starts one again (a restart
   * after backoff) finds it out of the answers until the next pass tracks it and its check passes.
   */
  private resting = new Set<string>();
  private stopped = false;

  constructor(private readonly options: { logger: Logger; onChange?: (containerId: string, view: CheckView) => void }) {}

  /** Starts (or updates) the checks of one running container; probes at once, then every interval. */
  track(containerId: string, input: TrackInput): void {
    this.held.delete(containerId);
    this.resting.delete(containerId);
    const current = this.tracked.get(containerId);
    const sameCheck = current && JSON.stringify(current.check) === JSON.stringify(input.check);
    if (current && sameCheck && current.startedAt === input.startedAt) {
      current.host = input.host ?? current.host;
      return;
    }
    if (current?.timer) clearTimeout(current.timer);
    const entry: Tracked = { ...input, seenAt: Date.now(), passes: 0, failures: 0, verdict: 'starting', last: current?.last ?? null, timer: null };
    this.tracked.set(containerId, entry);
    if (!this.stopped) void this.probe(containerId, entry);
  }

  /** A container about to start whose check has not run: no traffic until it is tracked and its check passes. */
  hold(containerId: string): void {
    this.held.add(containerId);
  }

  untrack(containerId: string): void {
    this.held.delete(containerId);
    const entry = this.tracked.get(containerId);
    if (entry?.timer) clearTimeout(entry.timer);
    this.tracked.delete(containerId);
  }

  /** Keeps only `keep` (the running containers of workloads with a check). */
  retain(keep: ReadonlySet<string>): void {
    for (const id of [...this.tracked.keys()]) if (!keep.has(id)) this.untrack(id);
  }

  view(containerId: string): CheckView | undefined {
    const entry = this.tracked.get(containerId);
    return entry ? { verdict: entry.verdict, lastProbe: entry.last } : undefined;
  }

  /** The running containers of the desired deployment of a workload with a health check are checked, its stopped ones held out (resting); no other. */
  trackRunning(rows: readonly ReadContainer[], workloadOf: (actual: ActualContainer) => Pick<Workload, 'healthCheck' | 'deploymentId'> | undefined, network: string): void {
    const keep = new Set<string>();
    const resting = new Set<string>();
    for (const { actual, details } of rows) {
      const workload = workloadOf(actual);
      const check = workload?.healthCheck;
      if (!check || workload.deploymentId !== actual.deploymentId) continue;
      if (actual.state !== 'running') {
        resting.add(actual.id);
        continue;
      }
      keep.add(actual.id);
      this.track(actual.id, { serviceId: actual.serviceId, check, host: details.ipAddresses?.[network] ?? null, startedAt: details.startedAt });
    }
    this.retain(keep);
    this.resting = resting;
  }

  /** A checked container's health is its HTTP check's verdict, with the last probe as evidence. */
  withCheck(state: ContainerState): ContainerState {
    const view = this.view(state.containerId);
    if (!view) return state;
    return { ...state, health: view.verdict, ...(view.lastProbe ? { lastProbe: view.lastProbe } : {}) };
  }

  /** Checked containers that must take no traffic now: not (yet, or no longer) healthy. */
  notServing(): Set<string> {
    const out = new Set<string>([...this.held, ...this.resting]);
    for (const [id, entry] of this.tracked) if (entry.verdict !== 'healthy') out.add(id);
    return out;
  }

  stop(): void {
    this.stopped = true;
    this.held.clear();
    this.resting.clear();
    for (const id of [...this.tracked.keys()]) this.untrack(id);
  }

  private async probe(containerId: string, entry: Tracked): Promise<void> {
    const { check } = entry;
    const started = Date.now();
    const result = entry.host === null
      ? { ok: false, evidence: { at: new Date(started).toISOString(), status: null, error: 'the container has no address on Tether\'s network', latencyMs: 0, body: '' } }
      : await probeHttp(entry.host, check.port, check.path, check.timeoutSeconds * 1000)
          .then((r) => ({ ok: r.ok, evidence: evidenceOf(r) }))
          .catch((err: unknown) => ({ ok: false, evidence: { at: new Date(started).toISOString(), status: null, error: errorMessage(err), latencyMs: Date.now() - started, body: '' } }));
    // Untracked or replaced meanwhile: this probe is nobody's evidence any more.
    if (this.tracked.get(containerId) !== entry || this.stopped) return;
    entry.last = result.evidence;
    const before = entry.verdict;
    if (result.ok) {
      entry.failures = 0;
      entry.passes++;
      if (entry.verdict !== 'healthy' && entry.passes >= check.healthyThreshold) entry.verdict = 'healthy';
    } else {
      entry.passes = 0;
      const inStartPeriod = entry.verdict === 'starting' && Date.now() - entry.seenAt < check.startPeriodSeconds * 1000;
      entry.failures = inStartPeriod ? 0 : entry.failures + 1;
      if (entry.failures >= check.unhealthyThreshold) entry.verdict = 'unhealthy';
    }
    if (entry.verdict !== before) {
      const level = entry.verdict === 'unhealthy' ? 'warn' : 'info';
      this.options.logger[level]({ containerId, serviceId: entry.serviceId, verdict: entry.verdict, probe: entry.last }, 'health check verdict changed');
      this.options.onChange?.(containerId, { verdict: entry.verdict, lastProbe: entry.last });
    }
    // Fixed rate: the next probe starts one interval after this one started (a slow probe does not stretch the bound).
    const delay = Math.max(0, check.intervalSeconds * 1000 - (Date.now() - started));
    entry.timer = setTimeout(() => void this.probe(containerId, entry), delay);
    entry.timer.unref();
  }
}
