import { describe, expect, it } from 'vitest';
import { EXAMPLE_MESSAGES, FRAME_ERROR_CODES, InvalidMessageError, MAX_STATE_FRAME_BYTES, decode, encode, maxFrameBytes, type Allocations } from '../src/index.js';

const example = EXAMPLE_MESSAGES.allocations;

function rejection(frame: Allocations): { code: string; message: string } {
  const result = decode(JSON.stringify(frame));
  if (result.ok) throw new Error('expected a rejection');
  return result.error;
}

describe('allocations set', () => {
  it('the example holds one service mid-rollout: two allocations on two releases', () => {
    expect(decode(encode(example))).toEqual({ ok: true, message: example });
    expect(new Set(example.allocations.map((a) => a.deploymentId)).size).toBe(2);
  });

  it('an allocation naming a release the frame lacks is refused at decode and encode, with the path', () => {
    const frame = { ...example, allocations: [...example.allocations, { allocationId: 'alc_09', serviceId: 'svc_01', deploymentId: 'dep_99' }] };
    expect(rejection(frame)).toEqual({ code: FRAME_ERROR_CODES.INVALID_FIELD, message: 'allocations: invalid field at /allocations/2: release dep_99 is not in releases', ref: 'p-10' });
    expect(() => encode(frame)).toThrow(InvalidMessageError);
  });

  it('an allocation naming another service\'s release is refused', () => {
    const frame = { ...example, allocations: [{ allocationId: 'alc_01', serviceId: 'svc_02', deploymentId: 'dep_07' }] };
    expect(rejection(frame).message).toContain('belongs to service svc_01, not svc_02');
  });

  it('an allocation id or a release listed twice is refused', () => {
    const twice = { ...example, allocations: [example.allocations[0]!, example.allocations[0]!] };
    expect(rejection(twice).message).toContain('/allocations/1: allocation alc_01 is listed twice');
    const release = { ...example, releases: [example.releases[0]!, example.releases[0]!] };
    expect(rejection(release).message).toContain('/releases/1: release dep_07 is listed twice');
  });

  it('a release carries no replicas (the allocations say how many), and an empty set is valid', () => {
    const withReplicas = { ...example, releases: example.releases.map((r) => ({ ...r, replicas: 3 })) };
    // Unknown fields are ignored (forward compatibility); the agent reads only the release's own fields.
    expect(decode(JSON.stringify(withReplicas)).ok).toBe(true);
    expect(decode(JSON.stringify({ type: 'allocations', id: 'p-1', releases: [], allocations: [] })).ok).toBe(true);
  });

  it('is a state frame (16 MiB); its status report from the agent is not', () => {
    expect(maxFrameBytes('allocations')).toBe(MAX_STATE_FRAME_BYTES);
    expect(maxFrameBytes('allocations.status')).toBeLessThan(MAX_STATE_FRAME_BYTES);
  });

  it('the status refuses an unknown state', () => {
    const status = EXAMPLE_MESSAGES['allocations.status'];
    const bad = { ...status, allocations: [{ ...status.allocations[0]!, state: 'exploded' }] };
    const result = decode(JSON.stringify(bad));
    expect(result.ok ? null : result.error.code).toBe(FRAME_ERROR_CODES.INVALID_FIELD);
  });
});
