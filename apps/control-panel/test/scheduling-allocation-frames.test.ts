import { describe, expect, it } from 'vitest';
import { CAPABILITIES, EXAMPLE_MESSAGES, decode, encode, type Workload } from '@tether/protocol';
import { MAX_FRAME_ALLOCATIONS, allocationsFrame } from '../src/scheduling/allocation-frames.js';
import { desiredWorkloads } from '../src/scheduling/desired-workloads.js';
import { DEFAULT_ROLLOUT, releaseOf, type ServiceSpec } from '../src/db/deployment-spec.js';
import type { Allocation } from '../src/scheduling/types.js';

// A node's allocations frame from its allocations and the release specs, without I/O.

const v1: Workload = { ...EXAMPLE_MESSAGES.deploy.workload, replicas: 3 };
const v2: Workload = { ...v1, deploymentId: 'dep_08', image: 'registry.example.com/web:1.4.3' };
const releases = new Map([[v1.deploymentId, v1], [v2.deploymentId, v2]]);
const alloc = (id: string, nodeId: string, releaseId: string, createdAt: number, desired: Allocation['desired'] = 'run'): Allocation => ({
  id, serviceId: v1.serviceId, nodeId, releaseId, createdAt, desired,
});
const every = new Set<string>(Object.values(CAPABILITIES));

describe('allocationsFrame', () => {
  it('one node mid-rollout: its allocations each with their own release, every release once without replicas, and it encodes', () => {
    const byNode = desiredWorkloads(['n1', 'n2'], [alloc('a3', 'n1', 'dep_07', 3), alloc('a1', 'n1', 'dep_08', 1), alloc('a2', 'n2', 'dep_07', 2), alloc('a4', 'n1', 'dep_07', 4, 'stop')]);
    const { frame, leftOut } = allocationsFrame(byNode.get('n1')!, releases, every);
    expect(leftOut).toEqual([]);
    expect(frame.allocations).toEqual([
      { allocationId: 'a1', serviceId: 'svc_01', deploymentId: 'dep_08' },
      { allocationId: 'a3', serviceId: 'svc_01', deploymentId: 'dep_07' },
    ]);
    expect(frame.releases.map((r) => r.deploymentId)).toEqual(['dep_08', 'dep_07']);
    expect(frame.releases.every((r) => !('replicas' in r))).toBe(true);
    const decoded = decode(encode({ ...frame, id: 'p-1' }));
    expect(decoded.ok).toBe(true);
  });

  it('a node without allocations gets an empty set (run nothing)', () => {
    const { frame } = allocationsFrame(desiredWorkloads(['n3'], []).get('n3')!, releases, every);
    expect(frame).toEqual({ type: 'allocations', releases: [], allocations: [] });
  });

  it('leaves out an allocation whose release is unknown or another service\'s, and sends nothing of that release', () => {
    const other = new Map([...releases, ['dep_x', { ...v1, serviceId: 'svc_02', deploymentId: 'dep_x' }]]);
    const desired = [
      { allocationId: 'a1', serviceId: 'svc_01', releaseId: 'dep_99' },
      { allocationId: 'a2', serviceId: 'svc_01', releaseId: 'dep_x' },
      { allocationId: 'a3', serviceId: 'svc_01', releaseId: 'dep_07' },
    ];
    const { frame, leftOut } = allocationsFrame(desired, other, every);
    expect(leftOut.map((l) => [l.allocationId, l.reason])).toEqual([['a1', 'RELEASE_UNKNOWN'], ['a2', 'RELEASE_UNKNOWN']]);
    expect(frame.releases.map((r) => r.deploymentId)).toEqual(['dep_07']);
  });

  it('a release needing a capability the agent lacks is left out with what is missing: its secrets never travel', () => {
    const secret: Workload = { ...v2, secrets: { TOKEN: 's3cret' }, healthCheck: { path: '/', port: 8080, intervalSeconds: 1, timeoutSeconds: 1, healthyThreshold: 1, unhealthyThreshold: 3, startPeriodSeconds: 0 } };
    const caps = new Set<string>([CAPABILITIES.WORKLOAD_ALLOCATIONS, CAPABILITIES.SECRETS]);
    const desired = [{ allocationId: 'a1', serviceId: 'svc_01', releaseId: 'dep_08' }, { allocationId: 'a2', serviceId: 'svc_01', releaseId: 'dep_07' }];
    const { frame, leftOut } = allocationsFrame(desired, new Map([['dep_08', secret], ['dep_07', v1]]), caps);
    expect(leftOut).toEqual([{ allocationId: 'a1', serviceId: 'svc_01', releaseId: 'dep_08', reason: 'AGENT_LACKS_CAPABILITY', missing: [CAPABILITIES.WORKLOAD_HEALTH_CHECK] }]);
    expect(JSON.stringify(frame)).not.toContain('s3cret');
  });

  it('a fenced release goes only to an agent that named workload.fence, with fence: true; to another it is left out', () => {
    const fenced: Workload = { ...v2, fence: true };
    const desired = [{ allocationId: 'a1', serviceId: 'svc_01', releaseId: 'dep_08' }];
    const without = allocationsFrame(desired, new Map([['dep_08', fenced]]), new Set<string>([CAPABILITIES.WORKLOAD_ALLOCATIONS]));
    expect(without.leftOut).toEqual([{ allocationId: 'a1', serviceId: 'svc_01', releaseId: 'dep_08', reason: 'AGENT_LACKS_CAPABILITY', missing: [CAPABILITIES.WORKLOAD_FENCE] }]);
    expect(without.frame.releases).toEqual([]);
    const withIt = allocationsFrame(desired, new Map([['dep_08', fenced]]), new Set<string>([CAPABILITIES.WORKLOAD_ALLOCATIONS, CAPABILITIES.WORKLOAD_FENCE]));
    expect(withIt.leftOut).toEqual([]);
    expect(withIt.frame.releases[0]!.fence).toBe(true);
  });

  it('a release of a rollout with maxSurge 0 carries stopFirst (unless a writable volume or fence stops first anyway) and goes only to an agent that named workload.stop-first', () => {
    const spec: ServiceSpec = { name: 'web', image: 'web:1', env: {}, internalPort: 8080, replicas: 3, rollout: { ...DEFAULT_ROLLOUT, maxSurge: 0, maxUnavailable: 1 } };
    const release = releaseOf('svc_01', 'dep_08', spec);
    expect(release.stopFirst).toBe(true);
    expect(releaseOf('svc_01', 'dep_08', { ...spec, rollout: DEFAULT_ROLLOUT }).stopFirst).toBeUndefined();
    expect(releaseOf('svc_01', 'dep_08', { ...spec, rollout: { ...DEFAULT_ROLLOUT, maxSurge: 1, maxUnavailable: 1 } }).stopFirst).toBeUndefined();
    expect(releaseOf('svc_01', 'dep_08', { ...spec, replicas: 1, volumes: [{ name: 'data', mountPath: '/data', readOnly: false }] }).stopFirst).toBeUndefined();
    expect(releaseOf('svc_01', 'dep_08', { ...spec, failover: { fence: true } }).stopFirst).toBeUndefined();
    const desired = [{ allocationId: 'a1', serviceId: 'svc_01', releaseId: 'dep_08' }];
    // (workloadOf sends drainSeconds: the capability an agent of this release names beside it.)
    const base = [CAPABILITIES.WORKLOAD_ALLOCATIONS, CAPABILITIES.WORKLOAD_DRAIN];
    const without = allocationsFrame(desired, new Map([['dep_08', release]]), new Set<string>(base));
    expect(without.leftOut).toEqual([{ allocationId: 'a1', serviceId: 'svc_01', releaseId: 'dep_08', reason: 'AGENT_LACKS_CAPABILITY', missing: [CAPABILITIES.WORKLOAD_STOP_FIRST] }]);
    const withIt = allocationsFrame(desired, new Map([['dep_08', release]]), new Set<string>([...base, CAPABILITIES.WORKLOAD_STOP_FIRST]));
    expect(withIt.frame.releases[0]!.stopFirst).toBe(true);
  });

  it('never carries more allocations than the schema allows', () => {
    const desired = Array.from({ length: MAX_FRAME_ALLOCATIONS + 2 }, (_, i) => ({ allocationId: `a${i}`, serviceId: 'svc_01', releaseId: 'dep_07' }));
    const { frame, leftOut } = allocationsFrame(desired, releases, every);
    expect(frame.allocations).toHaveLength(MAX_FRAME_ALLOCATIONS);
    expect(leftOut.map((l) => l.reason)).toEqual(['NODE_ALLOCATION_LIMIT', 'NODE_ALLOCATION_LIMIT']);
    expect(decode(encode({ ...frame, id: 'p-2' })).ok).toBe(true);
  });
});
