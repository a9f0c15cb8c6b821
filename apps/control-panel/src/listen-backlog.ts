import { readFileSync } from 'node:fs';

// The kernel caps a listen backlog at net.core.somaxconn without a word. A
// queue shorter than the burst a restarted panel meets makes the kernel drop
// connections, and their agents then wait out TCP retransmits (1, 3, 7 s…)
// while the panel may have nothing to do: said once at start, as Redis does.

/** net.core.somaxconn of this network namespace; undefined where it cannot be read (not Linux). */
export function readSomaxconn(read: (file: string) => string = (file) => readFileSync(file, 'utf8')): number | undefined {
  try {
    const value = Number(read('/proc/sys/net/core/somaxconn').trim());
    return Number.isInteger(value) && value > 0 ? value : undefined;
  } catch {
    return undefined;
  }
}

/** The warning for a backlog the kernel will cut short, or undefined when it is kept. */
export function backlogWarning(backlog: number, somaxconn: number | undefined): string | undefined {
  if (somaxconn === undefined || backlog <= somaxconn) return undefined;
  return (
    `TETHER_LISTEN_BACKLOG is ${backlog} but net.core.somaxconn is ${somaxconn}: the accept queue holds ${somaxconn}. ` +
    `A fleet larger than that reconnecting at once (a panel restart) meets dropped connections and waits out TCP retransmits; ` +
    `raise it (sysctl -w net.core.somaxconn=${backlog}, or the container's sysctls) or lower TETHER_LISTEN_BACKLOG to silence this.`
  );
}
