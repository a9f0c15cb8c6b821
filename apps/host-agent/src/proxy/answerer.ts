import { Resolver } from 'node:dns/promises';
import { sleep, type Logger } from '@tether/common';
import { writeFileAtomic } from '../state/atomic-file.js';
import { ProxyError } from './errors.js';
import { zoneText, type KnotPaths } from './knot-files.js';
import { ANSWER_ZONE, HEALTH_NAME } from './static-answers.js';

// The static proxy's answerer (docs/architecture.md, "Static proxy"): what
// Caddy asks per request, kept apart from the agent's fate. One interface,
// two implementations of Debian's knotd: a detached process beside an
// operator's Caddy (knot-answerer.ts, TETHER_PROXY=external) and a container
// in the Caddy container's network namespace (knot-container-answerer.ts,
// TETHER_PROXY=container). Both share the supervision below: probe over DNS,
// replace what does not answer, count starts and restarts the same way, and
// publish a zone file that knotd validates before it replaces the one it serves.

export interface AnswererStatus {
  /** The last probe got an answer. */
  up: boolean;
  /** knotd processes (or containers) started by this agent run (the first start included). */
  starts: number;
  /** Starts after a failed probe of an answerer that had been answering (crash, kill, freeze). */
  restarts: number;
  lastFailure: string | null;
  lastFailureAt: string | null;
  /** SOA serial served at the last probe. */
  serial: number | null;
}

export interface Answerer {
  /** `udp/host:port`, the resolver address in Caddy's static config: it never changes while the settings do not. */
  readonly caddyAddress: string;
  /** The zone file as the agent writes it. */
  readonly zonePath: string;
  status(): AnswererStatus;
  /** The SOA serial served now; throws when no answer comes within the probe timeout. */
  probe(): Promise<number>;
  /** Makes sure the answerer answers; starts (or replaces) it when it does not. Concurrent callers share one pass. */
  ensure(): Promise<void>;
  /** Replaces the zone with `records` and waits until it is served; a zone knotd refuses throws PROXY_ANSWERER_REJECTED. */
  publish(records: readonly string[]): Promise<number>;
  /** Stops the answerer (tests, decommissioning). An agent stop leaves it running on purpose. */
  destroy(): Promise<void>;
}

export interface KnotSupervisionOptions {
  /** Bound on one health probe (a DNS query). */
  probeTimeoutMs: number;
  /** How long a started knotd may take to answer. */
  startTimeoutMs?: number;
  logger: Logger;
}

export abstract class KnotSupervision implements Answerer {
  protected readonly state: AnswererStatus = { up: false, starts: 0, restarts: 0, lastFailure: null, lastFailureAt: null, serial: null };
  private inFlight: Promise<void> | null = null;

  constructor(
    readonly paths: KnotPaths,
    protected readonly supervision: KnotSupervisionOptions,
  ) {}

  abstract get caddyAddress(): string;
  /** Where the agent reaches knotd for its probe. */
  protected abstract probeTarget(): Promise<{ host: string; port: number }>;
  /** Removes what is left of a knotd that does not answer (or runs outdated settings) and starts a new one. */
  protected abstract replace(): Promise<void>;
  /** `knotc zone-reload` of the answer zone, blocking until knotd loaded it; throws with knotc's words. */
  protected abstract reload(): Promise<void>;
  abstract destroy(): Promise<void>;
  /** Whether the answering knotd runs the current settings; false: replaced (not counted as a restart). */
  protected current(): Promise<boolean> {
    return Promise.resolve(true);
  }

  get zonePath(): string {
    return this.paths.zone;
  }

  status(): AnswererStatus {
    return { ...this.state };
  }

  async probe(): Promise<number> {
    const resolver = new Resolver({ timeout: this.supervision.probeTimeoutMs, tries: 1 });
    const { host, port } = await this.probeTarget();
    resolver.setServers([host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`]);
    const [soa, health] = await Promise.all([resolver.resolveSoa(ANSWER_ZONE), resolver.resolve4(HEALTH_NAME)]);
    if (health[0] !== '127.0.0.1') throw new Error(`health record answered ${health.join(',')}`);
    return soa.serial;
  }

  ensure(): Promise<void> {
    this.inFlight ??= this.ensureOnce().finally(() => (this.inFlight = null));
    return this.inFlight;
  }

  private async ensureOnce(): Promise<void> {
    try {
      this.state.serial = await this.probeAfterStall();
      this.state.up = true;
      if (await this.current()) return;
      this.supervision.logger.warn({}, 'answerer runs outdated settings; replacing it');
    } catch (error) {
      const wasUp = this.state.up;
      this.state.up = false;
      this.state.lastFailure = (error as Error).message;
      this.state.lastFailureAt = new Date().toISOString();
      if (wasUp) this.state.restarts += 1;
      // At an agent's start no answerer runs yet: that first miss is the normal start, not a fault worth a warning.
      if (!wasUp && this.state.starts === 0) this.supervision.logger.info({}, 'no answerer running yet; starting the answerer');
      else this.supervision.logger.warn({ err: error, wasUp }, 'answerer did not answer; (re)starting knotd');
    }
    await this.replace();
  }

  /**
   * A probe whose failure can be trusted. A probe that failed long after its
   * timeout says the agent itself stalled (frozen, thawed: its timers ran
   * before it read the answer waiting in its socket), not that knotd did: it is
   * asked once more rather than the answerer being killed for the agent's own pause.
   * (A real timeout ends within 2× the timeout here: c-ares may send a query twice.)
   */
  private async probeAfterStall(): Promise<number> {
    const started = performance.now();
    try {
      return await this.probe();
    } catch (error) {
      if (performance.now() - started <= 3 * this.supervision.probeTimeoutMs) throw error;
      this.supervision.logger.warn({ err: error }, 'answerer probe failed after the agent stalled; asking again');
      return this.probe();
    }
  }

  /**
   * After a start: waits until knotd answers, within the start timeout.
   * `exited`: whether the started knotd is gone already (it can never answer: fail now, not at the timeout).
   */
  protected async waitAnswering(where: string, exited: () => boolean = () => false): Promise<void> {
    this.state.starts += 1;
    const deadline = Date.now() + (this.supervision.startTimeoutMs ?? 5_000);
    let last: unknown;
    while (Date.now() < deadline) {
      if (exited()) throw new ProxyError('PROXY_ANSWERER_FAILED', `knotd (${where}) exited before it answered; see ${this.paths.log}`);
      try {
        this.state.serial = await this.probe();
        this.state.up = true;
        this.supervision.logger.info({ where, serial: this.state.serial }, 'answerer (knotd) answering');
        return;
      } catch (error) {
        last = error;
      }
      await sleep(50);
    }
    throw new ProxyError('PROXY_ANSWERER_FAILED', `knotd (${where}) did not answer within its start timeout: ${(last as Error)?.message}; see ${this.paths.log}`);
  }

  /**
   * Replaces the zone with `records` under a serial above the one served, and
   * waits until knotd serves it. A zone knotd refuses leaves the last good one
   * answering and throws PROXY_ANSWERER_REJECTED.
   */
  async publish(records: readonly string[]): Promise<number> {
    const served = this.state.serial ?? (await this.probe().catch(() => 0));
    const serial = Math.max(served + 1, Math.floor(Date.now() / 1000)) >>> 0;
    await writeFileAtomic(this.paths.zone, zoneText(records, serial));
    try {
      await this.reload();
    } catch (error) {
      const out = `${(error as { stdout?: string }).stdout ?? ''}${(error as { stderr?: string }).stderr ?? ''}`.trim();
      throw new ProxyError('PROXY_ANSWERER_REJECTED', `knotd did not load the new zone (serial ${serial}): ${out || (error as Error).message}`, { cause: error });
    }
    this.state.serial = serial;
    return serial;
  }
}
