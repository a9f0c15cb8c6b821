import { describe, expect, it } from 'vitest';
import { EXAMPLE_MESSAGES } from '@tether/protocol';
import { LABELS } from '../../src/docker/docker-client.js';
import { allocationContainerSpec, containerSpec, identityOf } from '../../src/runtime/workload-spec.js';

// An allocation's container: the same spec as a deploy's, labelled with the allocation instead of a slot.

const [v7, v8] = EXAMPLE_MESSAGES.allocations.releases;

describe('allocationContainerSpec', () => {
  it('labels the allocation, no replica slot, and reads it back', () => {
    const spec = allocationContainerSpec('edge-1', 'tether', v7!, 'alc_01');
    expect(spec.labels[LABELS.allocation]).toBe('alc_01');
    expect(spec.labels[LABELS.replica]).toBeUndefined();
    expect(identityOf(spec.labels)).toEqual({ serviceId: 'svc_01', deploymentId: 'dep_07', replica: null, allocationId: 'alc_01' });
    const { name: _n, labels: _l, ...rest } = spec;
    const { name: _n2, labels: _l2, ...slotRest } = containerSpec('edge-1', 'tether', v7!, 0);
    expect(rest).toEqual(slotRest);
  });

  it('with a private address (routing.remote) the release\'s port is published there only, on a port Docker picks; without one, or without a port, nothing', () => {
    const spec = allocationContainerSpec('edge-1', 'tether', v7!, 'alc_01', '10.20.0.7');
    expect(spec.publish).toEqual({ [`${v7!.port}/tcp`]: { hostIp: '10.20.0.7' } });
    expect(spec.exposedPort).toBe(v7!.port);
    expect(allocationContainerSpec('edge-1', 'tether', v7!, 'alc_01').publish).toBeUndefined();
    expect(allocationContainerSpec('edge-1', 'tether', { ...v7!, port: null }, 'alc_01', '10.20.0.7').publish).toBeUndefined();
  });

  it('one allocation on two releases (mid-rollout) gets two names; a container without the label has no allocation', () => {
    expect(allocationContainerSpec('edge-1', 'tether', v7!, 'alc_01').name).toBe('tether-edge-1-web-dep_07-alc_01');
    expect(allocationContainerSpec('edge-1', 'tether', v8!, 'alc_01').name).toBe('tether-edge-1-web-dep_08-alc_01');
    expect(identityOf(containerSpec('edge-1', 'tether', v7!, 2).labels)).toEqual({ serviceId: 'svc_01', deploymentId: 'dep_07', replica: 2 });
  });
});
