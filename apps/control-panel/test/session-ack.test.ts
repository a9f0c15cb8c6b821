import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { WebSocket } from 'ws';
import { CLOSE_CODES } from '@tether/protocol';
import { AckTimeoutError, AgentSession, SessionClosedError } from '../src/sessions/session.js';
import { stubSocket } from './helpers/stub-socket.js';

// The ACK clock of a message starts when the frame is written to the socket,
// not when it is queued behind other frames in the panel's own send buffer.
// The socket is a stub whose writes complete when the test says so (helpers/stub-socket.ts).

const ACK_MS = 300;

function session(socket: unknown) {
  return new AgentSession(socket as WebSocket, 'n1', 'n1', 'peer', 'test', { idleTimeoutMs: 60_000, ackTimeoutMs: ACK_MS, sendBufferLimitBytes: 1e9 }, () => {});
}

describe('ACK timeout', () => {
  beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'Date', 'performance'] }));
  afterEach(() => vi.useRealTimers());

  it('counts from the moment the frame is written, not before, and kills the session after it', async () => {
    const { socket, flush } = stubSocket();
    const s = session(socket);
    const acked = s.sendAwaitingAck({ type: 'ping', id: 'p1' }).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(ACK_MS * 2); // still queued: the clock has not started
    expect(s.closed).toBeNull();
    flush();
    await vi.advanceTimersByTimeAsync(ACK_MS - 1);
    expect(s.closed).toBeNull();
    await vi.advanceTimersByTimeAsync(1);
    expect(await acked).toBeInstanceOf(AckTimeoutError);
    expect(s.closed?.code).toBe(CLOSE_CODES.ACK_TIMEOUT);
    expect(s.missedAcks).toBe(1);
  });

  it('an ACK in time resolves and leaves the session alone', async () => {
    const { socket, flush } = stubSocket();
    const s = session(socket);
    const acked = s.sendAwaitingAck({ type: 'ping', id: 'p2' });
    flush();
    await vi.advanceTimersByTimeAsync(ACK_MS - 10);
    expect(s.acknowledge('p2')).toBe(true);
    await expect(acked).resolves.toBeUndefined();
    await vi.advanceTimersByTimeAsync(ACK_MS * 2);
    expect(s.closed).toBeNull();
  });

  it('a frame that cannot be written within three ACK timeouts means the peer stopped reading', async () => {
    const { socket } = stubSocket();
    const s = session(socket);
    const acked = s.sendAwaitingAck({ type: 'ping', id: 'p3' }).catch((e: unknown) => e);
    await vi.advanceTimersByTimeAsync(3 * ACK_MS - 1);
    expect(s.closed).toBeNull();
    await vi.advanceTimersByTimeAsync(1);
    expect(await acked).toBeInstanceOf(SessionClosedError);
    expect(s.closed?.code).toBe(CLOSE_CODES.SLOW_CONSUMER);
  });
});
