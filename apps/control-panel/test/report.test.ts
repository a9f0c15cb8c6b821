import { describe, expect, it } from 'vitest';
import { EXAMPLE_MESSAGES } from '@tether/protocol';
import { nextReport, sameJson } from '../src/sessions/report.js';

const hb = EXAMPLE_MESSAGES.heartbeat;
const clone = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T;

describe('node report reuse', () => {
  it('compares JSON values structurally', () => {
    expect(sameJson({ a: [1, { b: null }] }, { a: [1, { b: null }] })).toBe(true);
    expect(sameJson({ a: [1] }, { a: [1, 2] })).toBe(false);
    expect(sameJson({ a: 1 }, { a: 1, b: undefined })).toBe(false);
    expect(sameJson([], {})).toBe(false);
    expect(sameJson(null, {})).toBe(false);
  });

  it('keeps the previous report, with a fresh time, when a heartbeat repeats it', () => {
    const first = nextReport(null, hb.containers, hb.runtime, hb.routing, 1);
    const again = clone(hb);
    const second = nextReport(first, again.containers, again.runtime, again.routing, 2);
    expect(second).toBe(first);
    expect(second.at).toBe(2);
    expect(second.containers).not.toBe(again.containers);
  });

  it('takes what changed and keeps what did not', () => {
    const first = nextReport(null, hb.containers, hb.runtime, hb.routing, 1);
    const changed = clone(hb);
    changed.containers[0]!.state = 'exited';
    changed.containers[0]!.exitCode = 137;
    const second = nextReport(first, changed.containers, changed.runtime, changed.routing, 2);
    expect(second).not.toBe(first);
    expect(second.containers[0]).toMatchObject({ state: 'exited', exitCode: 137 });
    expect(second.runtime).toBe(first.runtime);
    expect(second.routing).toBe(first.routing);
    expect(first.containers[0]!.state).toBe('running');
  });
});
