import { describe, expect, it } from 'vitest';
import { CAPABILITIES, type ProxyEvents, type ReloadEvent } from '@tether/protocol';
import { EventSender } from '../../src/connection/event-sender.js';

// The reload kind `static-move` is new: the agent sends it only to a panel
// that named `proxy.static` back in welcome; an older panel (which would
// refuse the frame) gets the same reload as a `change`.

const move: ReloadEvent = { event: 'reload', epoch: 1, seq: 1, at: '2026-12-01T00:00:00.000Z', kind: 'static-move', hashBefore: null, hashAfter: 'a'.repeat(64), reason: 'moved to the static proxy config' } as ReloadEvent;

function sent(capabilities: string[]): ProxyEvents[] {
  const out: ProxyEvents[] = [];
  const sender = new EventSender({ pending: () => [move], acknowledge: () => Promise.resolve(), onRecorded: () => () => undefined }, () => 'm1');
  sender.sessionReady(capabilities, 10_000);
  sender.flush((m) => (out.push(m), true));
  return out;
}

describe('reload kind static-move on the wire', () => {
  it('travels as static-move to a panel that confirmed proxy.static', () => {
    expect(sent([CAPABILITIES.PROXY_EVENTS, CAPABILITIES.PROXY_STATIC])[0]!.events[0]).toMatchObject({ kind: 'static-move' });
  });
  it('travels as change to a panel that did not', () => {
    expect(sent([CAPABILITIES.PROXY_EVENTS])[0]!.events[0]).toMatchObject({ kind: 'change', reason: 'moved to the static proxy config' });
  });
});
