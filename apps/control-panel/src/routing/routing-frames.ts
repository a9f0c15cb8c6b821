import { encode, maxFrameBytes, type Route, type RoutingMap } from '@tether/protocol';
import type { PreparedFrame } from '../sessions/session.js';

// A routing map is the largest frame the panel sends (1.1 MB at 10,000
// routes) and the one it sends most: to its node on every periodic push, and
// the same map to every node that has it. encode() validates and serializes
// the whole message on every call: about 7 ms of CPU per push at 10,000
// routes, 7 s per push cycle over 1,000 sessions (docs/benchmarks.md, "Panel
// routing push"). Here the routes of a map are validated and serialized once
// per map hash, into one buffer that every send shares (as the last fragment
// of its WebSocket message, never copied), and each send writes only its own
// id and version before it. Without the sharing, 1,000 sessions' send queues
// held 1,000 copies of the map: 2.4 GB of panel memory per cycle.

interface HeldMap {
  routes: Route[];
  /** Nodes whose desired map this is; the entry goes when none is left. */
  users: number;
  /** `"routes":[…]}`, once a frame was asked for: shared as a buffer when big, else as text. */
  tail: Buffer | string | null;
}

const MAX_BYTES = maxFrameBytes('routing.map');
/** Smaller maps go out as one frame: copying them costs less than a second fragment. */
const SHARE_MIN_BYTES = 64 * 1024;

export class RoutingFrames {
  private readonly maps = new Map<string, HeldMap>();
  /** Maps serialized so far (each once while it is in use). */
  serializations = 0;

  /** A node's desired map is now this one. Cheap: nothing is serialized until a frame is asked for. */
  use(hash: string, routes: Route[]): void {
    const held = this.maps.get(hash);
    if (held) held.users++;
    else this.maps.set(hash, { routes, users: 1, tail: null });
  }

  /** A node's desired map is no longer this one. */
  drop(hash: string): void {
    const held = this.maps.get(hash);
    if (held && --held.users === 0) this.maps.delete(hash);
  }

  /** Maps in use (distinct hashes). */
  get size(): number {
    return this.maps.size;
  }

  /**
   * The frame of { type, id, version, hash, routes }, where routes are the ones
   * in use under `message.hash`: head and tail together are the bytes encode()
   * gives. Throws what encode() throws for an invalid or oversized map.
   */
  frame(message: RoutingMap): PreparedFrame {
    const held = this.maps.get(message.hash);
    // The shared part is validated once; a send's own id and version are checked here, anything unusual whole.
    const plain = message.id.length >= 1 && message.id.length <= 128 && Number.isSafeInteger(message.version) && message.version >= 0;
    if (!held || !plain) return whole(message);
    const head = envelope(message);
    if (!held.tail) {
      // encode() is the validation (schema, frame size); what follows the envelope is what every frame shares.
      const full = encode({ type: 'routing.map', id: message.id, version: message.version, hash: message.hash, routes: held.routes });
      if (!full.startsWith(head)) throw new Error('routing.map envelope is not where JSON.stringify puts it');
      const tail = full.slice(head.length);
      held.tail = Buffer.byteLength(tail) >= SHARE_MIN_BYTES ? Buffer.from(tail) : tail;
      this.serializations++;
    }
    const tail = held.tail;
    // Another id can make the frame a few bytes longer than the one validated.
    if (Buffer.byteLength(tail) + Buffer.byteLength(head) > MAX_BYTES) return whole(message);
    return typeof tail === 'string' ? { head: head + tail, tail: EMPTY } : { head, tail };
  }
}

function whole(message: RoutingMap): PreparedFrame {
  return { head: encode(message), tail: EMPTY };
}

const EMPTY = Buffer.alloc(0);

/** A routing.map frame up to its routes, as JSON.stringify writes it. */
function envelope(m: RoutingMap): string {
  return `{"type":"routing.map","id":${JSON.stringify(m.id)},"version":${JSON.stringify(m.version)},"hash":${JSON.stringify(m.hash)},`;
}
