import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { InvalidMessageError, decode, encode, routingHash, serviceUpstream, type Route, type RoutingMap } from '@tether/protocol';
import { wireRouting } from '../src/agent-side.js';
import { PanelEvents } from '../src/panel-events.js';
import { RoutingFrames } from '../src/routing/routing-frames.js';
import { routingMapContent } from '../src/routing/routing-map.js';
import { RoutingReconciler } from '../src/routing/routing-reconciler.js';
import { FrameRouter } from '../src/sessions/frame-router.js';
import { SessionRegistry } from '../src/sessions/registry.js';
import { AgentSession, type PreparedFrame } from '../src/sessions/session.js';
import type { SessionStore } from '../src/session-writes/session-store.js';

// A routing map is validated and serialized once per hash and shared by every
// push and every node that carries it; what goes on the wire must be exactly
// what encode() would have written for that push.

const text = (f: PreparedFrame) => Buffer.concat([Buffer.from(f.head), f.tail]).toString('utf8');
const logger = pino({ level: 'silent' });
const timing = { idleTimeoutMs: 60_000, ackTimeoutMs: 5_000, sendBufferLimitBytes: 1e9 };

const routes = (n: number, name = 'app'): Route[] =>
  Array.from({ length: n }, (_, i) => ({ domain: `${name}-${i}.example.com`, pathPrefix: i % 3 ? null : '/api', serviceId: `s${i}`, upstream: serviceUpstream(`s${i}`, 8080) }));

const mapMessage = (id: string, version: number, r: Route[]): RoutingMap => ({ type: 'routing.map', id, version, hash: routingHash(r), routes: r });

describe('RoutingFrames', () => {
  it('writes the same bytes as encode() for every push, and serializes a map once', () => {
    const frames = new RoutingFrames();
    for (const size of [3, 1_000]) {
      const shop = routes(size);
      frames.use(routingHash(shop), shop);
      for (const [id, version] of [['r-1', 1], ['r-2', 1_795_000_000_000], ['ü-ñ', 0]] as const) {
        const message = mapMessage(id, version, shop);
        expect(text(frames.frame(message))).toBe(encode(message));
      }
    }
    // A small map is one frame, a big one two fragments around a shared buffer.
    expect(frames.frame(mapMessage('r-3', 1, routes(3))).tail).toHaveLength(0);
    expect(frames.frame(mapMessage('r-3', 1, routes(1_000))).tail.length).toBeGreaterThan(64 * 1024);
    expect(frames.serializations).toBe(2);
  });

  it('one serialization per hash across nodes, one shared buffer for a big map; released when no node uses it any more', () => {
    const frames = new RoutingFrames();
    // Big enough (over 64 KiB) to be shared rather than copied.
    const a = routes(1_000, 'a');
    const b = routes(1_000, 'b');
    frames.use(routingHash(a), a);
    // A second node computed the same map: another array, the same hash.
    frames.use(routingHash(a), structuredClone(a));
    frames.use(routingHash(b), b);
    const tails = new Set(Array.from({ length: 100 }, (_, i) => frames.frame(mapMessage(`r-${i}`, i, i % 2 ? a : b)).tail));
    expect(frames.serializations).toBe(2);
    // The very same buffers, not copies.
    expect(tails.size).toBe(2);
    expect(frames.size).toBe(2);
    frames.drop(routingHash(a));
    expect(frames.size).toBe(2);
    frames.drop(routingHash(a));
    frames.drop(routingHash(b));
    expect(frames.size).toBe(0);
    // Not held: still the right bytes, from encode().
    expect(text(frames.frame(mapMessage('r-x', 1, a)))).toBe(encode(mapMessage('r-x', 1, a)));
  });

  it('refuses what encode() refuses: an invalid map, and an id or version outside the schema', () => {
    const frames = new RoutingFrames();
    const bad = [{ domain: 'x.example.com', pathPrefix: null, serviceId: 's', upstream: 42 }] as unknown as Route[];
    frames.use(routingHash(routes(1)), bad);
    expect(() => frames.frame(mapMessage('r-1', 1, routes(1)))).toThrow(InvalidMessageError);
    const good = routes(3);
    frames.use(routingHash(good), good);
    expect(() => frames.frame(mapMessage('x'.repeat(129), 1, good))).toThrow(InvalidMessageError);
    expect(() => frames.frame(mapMessage('r-1', -1, good))).toThrow(InvalidMessageError);
    expect(() => frames.frame(mapMessage('', 1, good))).toThrow(InvalidMessageError);
  });
});

describe('a prepared frame on a real WebSocket', () => {
  it('arrives as one text message, byte for byte what encode() gives, and the session matches the ACK', async () => {
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    await new Promise((resolve) => wss.once('listening', resolve));
    const client = new WebSocket(`ws://127.0.0.1:${(wss.address() as { port: number }).port}`);
    const server = await new Promise<WebSocket>((resolve) => wss.once('connection', resolve));
    await new Promise((resolve) => client.once('open', resolve));
    const session = new AgentSession(server, 'n1', 'n1', 'test', 'test', timing, () => undefined);
    server.on('message', (data: Buffer) => session.acknowledge(JSON.parse(data.toString()).ref));
    const frames = new RoutingFrames();
    const map = routes(2_000);
    frames.use(routingHash(map), map);
    const received: Array<{ data: string; isBinary: boolean }> = [];
    client.on('message', (data: Buffer, isBinary) => {
      received.push({ data: data.toString('utf8'), isBinary });
      client.send(JSON.stringify({ ref: JSON.parse(data.toString()).id }));
    });
    const first = mapMessage('r-1', 7, map);
    await session.sendAwaitingAck(first, 5_000, frames.frame(first));
    // A plain message right after is a message of its own, not part of the map.
    const ping = { type: 'ping' as const, id: 'p-1' };
    session.send(ping);
    const second = mapMessage('r-2', 8, map);
    await session.sendAwaitingAck(second, 5_000, frames.frame(second));
    expect(received).toEqual([
      { data: encode(first), isBinary: false },
      { data: encode(ping), isBinary: false },
      { data: encode(second), isBinary: false },
    ]);
    session.teardown(1000, 'test over');
    client.terminate();
    await new Promise((resolve) => wss.close(resolve));
  });
});

describe('RoutingReconciler with shared frames', () => {
  it('pushes every session its own frame (own id) of the one serialization of their common map', async () => {
    const registry = new SessionRegistry({ store: new Proxy({}, { get: () => async () => [] }) as SessionStore, logger, pingIntervalMs: 60_000, lastSeenFlushMs: 60_000 });
    const shared = routingMapContent(routes(1_000));
    const reconciler = new RoutingReconciler({
      sessions: registry,
      maps: { mapFor: async () => shared },
      reloads: { reloaded: async () => undefined },
      logger,
      intervalMs: 60_000,
      debounceMs: 0,
    });
    wireRouting(registry, new FrameRouter(), new PanelEvents(), reconciler);
    const sent: Record<string, string[]> = {};
    for (const nodeId of ['n1', 'n2', 'n3']) {
      const holder: { session?: AgentSession } = {};
      let fragments: Buffer[] = [];
      const socket = {
        bufferedAmount: 0,
        // Reassembles fragments the way a WebSocket receiver does.
        send(data: string | Buffer, options?: { fin?: boolean }) {
          fragments.push(Buffer.from(data));
          if (options?.fin === false) return;
          const message = Buffer.concat(fragments).toString('utf8');
          fragments = [];
          (sent[nodeId] ??= []).push(message);
          const decoded = decode(message, { maxBytes: 16 * 1024 * 1024 });
          if (decoded.ok) queueMicrotask(() => holder.session?.acknowledge(decoded.message.id));
        },
        close() {},
        terminate() {},
      } as unknown as WebSocket;
      holder.session = new AgentSession(socket, nodeId, nodeId, 'test', 'test', timing, registry.onTeardown);
      registry.open(holder.session);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
    reconciler.changed(['n1', 'n2', 'n3'], 'again');
    await new Promise((resolve) => setTimeout(resolve, 50));

    const frames = Object.values(sent).flat();
    expect(frames).toHaveLength(6);
    const decoded = frames.map((frame) => {
      const result = decode(frame, { maxBytes: 16 * 1024 * 1024 });
      if (!result.ok || result.message.type !== 'routing.map') throw new Error(`not a routing map: ${frame.slice(0, 80)}`);
      // Byte for byte what encode() makes of the decoded message.
      expect(frame).toBe(encode(result.message));
      return result.message;
    });
    expect(new Set(decoded.map((m) => m.id)).size).toBe(6);
    for (const m of decoded) expect(m).toMatchObject({ hash: shared.hash, routes: shared.routes });
    expect(reconciler.frames.serializations).toBe(1);
    expect(reconciler.frames.size).toBe(1);
    for (const nodeId of ['n1', 'n2', 'n3']) registry.get(nodeId)?.teardown(1000, 'test over');
    await reconciler.stop();
  });
});
