import { describe, expect, it } from 'vitest';
import type { WebSocket } from 'ws';
import { CLOSE_CODES } from '@tether/protocol';
import { ManualClock } from '@tether/testkit';
import { AckTimeoutError, AgentSession } from '../src/sessions/session.js';
import { stubSocket } from './helpers/stub-socket.js';

// Deadlines are never early. Node arms timers off the loop's cached, rounded
// clock and can fire a millisecond before the interval; the clock here fires
// every timer 1 ms early, and the session must still wait out the whole
// deadline, measured from the last frame.

const IDLE_MS = 3_000;
const ACK_MS = 500;

function session(clock: ManualClock) {
  const { socket, flush } = stubSocket();
  const s = new AgentSession(socket as unknown as WebSocket, 'n1', 'n1', 'peer', 'test', { idleTimeoutMs: IDLE_MS, ackTimeoutMs: ACK_MS, sendBufferLimitBytes: 1e9, clock }, () => {});
  return { s, socket, flush };
}

describe('session deadlines with a clock whose timers fire 1 ms early', () => {
  it('the read-idle deadline tears down after the whole silence, not a millisecond before', () => {
    const clock = new ManualClock(1);
    const { s } = session(clock);
    clock.advance(IDLE_MS - 0.25);
    expect(s.closed).toBeNull();
    clock.advance(1.25);
    expect(s.closed?.code).toBe(CLOSE_CODES.IDLE_TIMEOUT);
    expect(s.closed?.reason).toBe(`no frame for ${IDLE_MS} ms (read-idle deadline ${IDLE_MS} ms)`);
  });

  it('a frame restarts the whole deadline, also right after an early fire', () => {
    const clock = new ManualClock(1);
    const { s } = session(clock);
    clock.advance(IDLE_MS - 0.5); // the timer fired early here and waits out the rest
    s.touch();
    clock.advance(IDLE_MS - 0.25);
    expect(s.closed).toBeNull();
    clock.advance(1);
    expect(s.closed?.code).toBe(CLOSE_CODES.IDLE_TIMEOUT);
  });

  it('the ACK timeout kills the session after the whole timeout from the write, not before', async () => {
    const clock = new ManualClock(1);
    const { s, flush } = session(clock);
    const acked = s.sendAwaitingAck({ type: 'ping', id: 'p1' }).catch((e: unknown) => e);
    flush();
    clock.advance(ACK_MS - 0.25);
    expect(s.closed).toBeNull();
    clock.advance(1.25);
    expect(await acked).toBeInstanceOf(AckTimeoutError);
    expect(s.closed?.code).toBe(CLOSE_CODES.ACK_TIMEOUT);
  });
});
