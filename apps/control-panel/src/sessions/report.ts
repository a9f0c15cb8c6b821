import type { ContainerState, RoutingStatus, RuntimeStatus } from '@tether/protocol';

// Every heartbeat carries the node's whole report, and almost always the same
// one. Keeping the previous objects when nothing changed lets each decoded
// heartbeat die young: otherwise every report lives one heartbeat interval,
// is promoted to the old generation and makes the heap (and RSS) grow with
// sessions × heartbeat rate. Measured in bench/sessions.ts.

/** What the agent last reported; exists only as long as the session does. */
export interface NodeReport {
  containers: ContainerState[];
  runtime: RuntimeStatus;
  routing: RoutingStatus;
  /** When the frame carrying this report arrived (ms since epoch). */
  at: number;
}

/** Structural equality of JSON values (what decode() produces). */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameJson(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const ka = Object.keys(a);
  if (ka.length !== Object.keys(b).length) return false;
  for (const k of ka) if (!sameJson((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k])) return false;
  return true;
}

/** The report to keep: the previous one, updated in place, when its content is unchanged. */
export function nextReport(
  previous: NodeReport | null,
  containers: ContainerState[],
  runtime: RuntimeStatus,
  routing: RoutingStatus,
  at: number,
): NodeReport {
  if (!previous) return { containers, runtime, routing, at };
  const same = {
    containers: sameJson(previous.containers, containers) ? previous.containers : containers,
    runtime: sameJson(previous.runtime, runtime) ? previous.runtime : runtime,
    routing: sameJson(previous.routing, routing) ? previous.routing : routing,
  };
  if (same.containers === previous.containers && same.runtime === previous.runtime && same.routing === previous.routing) {
    previous.at = at;
    return previous;
  }
  return { ...same, at };
}
