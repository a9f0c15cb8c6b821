import { describe, expect, it } from 'vitest';
import { CAPABILITIES, CLOSE_CODES } from '@tether/protocol';
import type { CertificateSharing, RoutingController, WorkloadController } from '../../src/controllers.js';
import type { LogStreams } from '../../src/logs/index.js';
import { ProtocolVersions } from '../../src/connection/handshake.js';
import { SessionTerms } from '../../src/connection/session-terms.js';

// What a session agreed on (session-terms.ts): a capability counts only when the welcome confirmed it and the part
// that carries it out is there.

const sharing = { challengePort: 80 } as CertificateSharing;
const logs = {} as LogStreams;
const full = {
  workloads: { setAllocations: () => undefined, removeVolumes: async () => undefined } as unknown as WorkloadController,
  routing: { certificateSharing: sharing } as unknown as RoutingController,
  logs,
};
const bare = { workloads: {} as WorkloadController, routing: {} as RoutingController };

describe('session terms', () => {
  it('nothing is agreed on that the welcome did not confirm', () => {
    const terms = new SessionTerms([], full);
    expect([terms.allocations, terms.volumesRemove(undefined), terms.volumesInventory, terms.drainReports, terms.remoteEndpoints]).toEqual([false, false, false, false, false]);
    expect(terms.certificates).toBeNull();
    expect(terms.logs).toBeNull();
  });

  it('a confirmed capability counts only with the part that carries it out', () => {
    const all = Object.values(CAPABILITIES);
    const agreed = new SessionTerms(all, full);
    expect([agreed.allocations, agreed.volumesRemove(['data']), agreed.drainReports, agreed.remoteEndpoints]).toEqual([true, true, true, true]);
    expect(agreed.certificates).toBe(sharing);
    expect(agreed.logs).toBe(logs);
    const missing = new SessionTerms(all, bare);
    expect([missing.allocations, missing.volumesRemove(undefined)]).toEqual([false, false]);
    expect(missing.certificates).toBeNull();
    expect(missing.logs).toBeNull();
  });

  it('removing single volumes needs volumes.inventory as well as workload.volumes', () => {
    const terms = new SessionTerms([CAPABILITIES.WORKLOAD_VOLUMES], full);
    expect(terms.volumesRemove(undefined)).toBe(true);
    expect(terms.volumesRemove(['data'])).toBe(false);
  });
});

describe('protocol versions', () => {
  const range = { min: 1, max: 3 };

  it('steps down once per refusal before welcome, then starts from the highest again', () => {
    const v = new ProtocolVersions(range);
    expect(v.begin()).toBe(3);
    v.error({ type: 'error', id: 'p1', ref: 'a1', code: 'UNSUPPORTED_PROTOCOL_VERSION', message: 'no' });
    expect(v.closed(4004, false)).toEqual({ refused: true, lower: 2 });
    expect(v.begin()).toBe(2);
    expect(v.closed(1006, false)).toEqual({ refused: false, lower: null });
    expect(v.begin()).toBe(3);
  });

  it('a session that was welcomed was not refused, and the oldest version has nothing lower', () => {
    const v = new ProtocolVersions({ min: 1, max: 1 });
    v.begin();
    expect(v.closed(CLOSE_CODES.UNSUPPORTED_PROTOCOL_VERSION, true)).toEqual({ refused: false, lower: null });
    v.begin();
    expect(v.closed(CLOSE_CODES.UNSUPPORTED_PROTOCOL_VERSION, false)).toEqual({ refused: true, lower: null });
  });
});
