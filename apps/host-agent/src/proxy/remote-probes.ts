import net from 'node:net';
import { createLoop, splitHostPort, type Logger, type Loop } from '@tether/common';

// The answers are the proxy's health mechanism (DESIGN, services across
// nodes): Caddy 2.6.2 keeps no health of dynamic upstreams, so this agent
// TCP-connects every remote endpoint of its applied routing map itself and
// the answers leave out the ones that fail. It reads only the last applied
// map, so a node that lost its replica leaves every other node's answers even
// while no panel is in reach. One failed connect marks an endpoint failing,
// one success passing again; a new endpoint counts as passing and is probed
// at once.

export interface RemoteProbesOptions {
  /** TETHER_REMOTE_PROBE_INTERVAL_MS: a round probes every endpoint, the next starts this long after it ended. */
  intervalMs: number;
  /** TETHER_REMOTE_PROBE_TIMEOUT_MS: bound on one connect. */
  timeoutMs: number;
  /** An endpoint went failing or passing: the answers must be computed again. */
  onChange: () => void;
  logger: Logger;
}

/** One TCP connect to `address:port` (IPv6 in brackets): true once connected, false on an error or after `timeoutMs`. */
export function connectProbe(endpoint: string, timeoutMs: number): Promise<boolean> {
  const { host, port } = splitHostPort(endpoint);
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

export class RemoteProbes {
  private tracked = new Set<string>();
  private readonly failing = new Set<string>();
  /** Tracked since the last round began: probed as soon as the round in flight ends, not an interval later. */
  private readonly unprobed = new Set<string>();
  private readonly loop: Loop;
  /** Connects made and state changes seen in this run (tests, logs). */
  readonly stats = { probes: 0, rounds: 0, changes: 0 };

  constructor(private readonly options: RemoteProbesOptions) {
    this.loop = createLoop({
      name: 'remote-probes',
      intervalMs: options.intervalMs,
      run: () => this.round(),
      onError: (err) => options.logger.warn({ err }, 'remote probe round failed; next round as usual'),
    });
  }

  start(): void {
    this.loop.start();
    if (this.tracked.size > 0) void this.loop.trigger();
  }

  stop(): Promise<void> {
    return this.loop.stop();
  }

  /** The endpoints failing their last probe. */
  get failingEndpoints(): ReadonlySet<string> {
    return this.failing;
  }

  /** The distinct remote endpoints of the applied map; one not seen before is probed at once. */
  track(endpoints: Iterable<string>): void {
    const next = new Set(endpoints);
    const fresh = [...next].filter((e) => !this.tracked.has(e));
    // An endpoint that left the map leaves no answer behind either: its state can go without a change.
    for (const e of [...this.failing, ...this.unprobed]) {
      if (next.has(e)) continue;
      this.failing.delete(e);
      this.unprobed.delete(e);
    }
    this.tracked = next;
    for (const e of fresh) this.unprobed.add(e);
    if (fresh.length > 0 && this.loop.running) void this.loop.trigger();
  }

  private async round(): Promise<void> {
    await this.probe([...this.tracked]);
    while (this.unprobed.size > 0) await this.probe([...this.unprobed]);
    this.stats.rounds += 1;
  }

  private async probe(endpoints: readonly string[]): Promise<void> {
    for (const e of endpoints) this.unprobed.delete(e);
    const results = await Promise.all(endpoints.map(async (e) => [e, await connectProbe(e, this.options.timeoutMs)] as const));
    this.stats.probes += results.length;
    let changed = false;
    for (const [endpoint, ok] of results) {
      if (!this.tracked.has(endpoint) || ok !== this.failing.has(endpoint)) continue;
      if (ok) {
        this.failing.delete(endpoint);
        this.options.logger.info({ endpoint }, 'remote endpoint passes its probe again; back in the answers');
      } else {
        this.failing.add(endpoint);
        this.options.logger.warn({ endpoint, timeoutMs: this.options.timeoutMs }, 'remote endpoint failed its probe (TCP connect); out of the answers');
      }
      changed = true;
    }
    if (!changed) return;
    this.stats.changes += 1;
    this.options.onChange();
  }
}
