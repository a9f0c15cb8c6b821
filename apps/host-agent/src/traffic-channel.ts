import type { ProxyTraffic } from './controllers.js';

// The one edge of the agent's composition that points back (docs/architecture.md, "Host agent"). The routing
// controller reads the workloads' not-serving set, so the workloads are made first; a drain of theirs asks the
// proxy to switch its answers and to count what is still open. They ask through this channel, made before both:
// the routing controller answers on it from the moment it is made (compose.ts), and never changes after.

export class TrafficChannel {
  private proxy: ProxyTraffic | undefined;

  /** The routing controller's drain side answers from now on (absent: nothing is proxied, TETHER_PROXY=none). */
  answerFrom(proxy: ProxyTraffic | undefined): void {
    if (this.proxy) throw new Error('the traffic channel already has its proxy');
    this.proxy = proxy;
  }

  /** What a drain reads: the proxy's drain side, undefined when nothing is proxied. */
  readonly traffic = (): ProxyTraffic | undefined => this.proxy;
}
