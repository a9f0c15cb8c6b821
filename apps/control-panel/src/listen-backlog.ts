import { readFileSync } from 'node:fs';

// The kernel caps a listen backlog at net.core.somaxconn without a word. When
// a whole fleet reconnects at once (a panel restart) and the accept queue is
// shorter than the fleet, the kernel drops connections and their agents wait
// out TCP retransmits (1, 3, 7 s…) while the panel may have nothing to do:
// measured, 4,650–10,098 drops per 10,000-agent storm with a 4,096 queue,
// connects up to 5.1 s and a bimodal storm (docs/benchmarks.md). Said once at
// start, only when the registered fleet is larger than the queue.

/** net.core.somaxconn of this network namespace; undefined where it cannot be read (not Linux). */
export function readSomaxconn(read: (file: string) => string = (file) => readFileSync(file, 'utf8')): number | undefined {
  try {
    const value = Number(read('/proc/sys/net/core/somaxconn').trim());
    return Number.isInteger(value) && value > 0 ? value : undefined;
  } catch {
    return undefined;
  }
}

/** The warning when the nodes that would reconnect at once outnumber the accept queue, else undefined. */
export function backlogWarning(nodes: number, backlog: number, somaxconn: number | undefined): string | undefined {
  const queue = somaxconn === undefined ? backlog : Math.min(backlog, somaxconn);
  if (nodes <= queue) return undefined;
  const cap = somaxconn !== undefined && somaxconn < backlog ? ` (TETHER_LISTEN_BACKLOG ${backlog}, cut to net.core.somaxconn ${somaxconn})` : ` (TETHER_LISTEN_BACKLOG ${backlog})`;
  const wanted = 2 ** Math.ceil(Math.log2(nodes));
  const raise = somaxconn !== undefined && somaxconn < wanted ? `raise net.core.somaxconn (sysctl -w net.core.somaxconn=${wanted}, or the container's sysctls)` : '';
  const set = backlog < wanted ? `set TETHER_LISTEN_BACKLOG=${wanted}` : '';
  return (
    `${nodes} nodes are registered but the accept queue holds ${queue}${cap}: when they reconnect at once (a panel restart), ` +
    `the kernel drops the connections past it and their agents wait out TCP retransmits; ${[raise, set].filter(Boolean).join(' and ')}.`
  );
}
