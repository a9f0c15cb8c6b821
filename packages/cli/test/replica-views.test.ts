import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answeringPanel } from './helpers/answering-panel.js';

// `tether status` with status per replica (issue 36): `2/3` in REPLICAS and a
// line per replica that should run and is not running healthy (unknown,
// unhealthy, failed), none for the healthy ones or a replica being removed.
// The panel here is a server answering what GET /v1/status answers (the real
// panel: apps/control-panel/test/allocation-sync.test.ts).

const replica = (id: string, node: string, patch: Record<string, unknown> = {}) => ({
  allocationId: id,
  node: { id: `n-${node}`, name: node },
  desired: 'run',
  state: 'running',
  deploymentId: 'dep_2',
  runningDeploymentId: 'dep_2',
  health: 'healthy',
  code: null,
  reason: null,
  evidence: { sessionId: `ses_${node}`, statusAgeMs: 4_000 },
  ...patch,
});
const web = {
  serviceId: 's1',
  name: 'web',
  teamId: 't1',
  node: { id: 'n-a', name: 'a' },
  state: 'degraded',
  desiredReplicas: 3,
  runningReplicas: 1,
  unknownReplicas: 1,
  reason: '1/3 running across 3 node(s) by their allocations, 1 unknown',
  containers: [],
  evidence: { sessionId: 'ses_a', lastFrameAgeMs: 20, reportAgeMs: 20 },
  routes: [],
  allocations: [
    replica('alc_1', 'a'),
    replica('alc_2', 'b', { health: 'unhealthy' }),
    replica('alc_3', 'c', { state: 'unknown', code: 'NODE_UNREACHABLE', reason: 'node c unreachable since 2026-12-04T20:00:00.000Z', evidence: { sessionId: 'ses_c', statusAgeMs: 61_000 } }),
    replica('alc_4', 'a', { desired: 'stop', state: 'removed' }),
  ],
};
const answers: Record<string, unknown> = {
  '/v1/status': { services: [web] },
  '/v1/services': [{ id: 's1', name: 'web' }],
  '/v1/services/s1/status': web,
};

const panel = answeringPanel(answers, 'replicas');
beforeAll(() => panel.start());
afterAll(() => panel.stop());
const run = (argv: string[]) => panel.run(argv);

describe('replicas in tether status', () => {
  it('shows 1/3 and a line under the service per unhealthy or unknown replica', async () => {
    const { code, stdout } = await run(['status']);
    expect(code).toBe(0);
    const lines = stdout.trimEnd().split('\n');
    // NODE lists the nodes of the replicas that should run, not only the home node.
    expect(lines[1]).toMatch(/^web +degraded +1\/3 +a,b,c +/);
    expect(lines.slice(2)).toEqual([
      '  ↳ replica alc_2 on b: running, unhealthy (last status 4 s ago, session ses_b)',
      '  ↳ replica alc_3 on c: unknown NODE_UNREACHABLE: node c unreachable since 2026-12-04T20:00:00.000Z (last status 61 s ago, session ses_c)',
    ]);
  });

  it('tether status <service>: the same lines', async () => {
    const { code, stdout } = await run(['status', 'web']);
    expect(code).toBe(0);
    expect(stdout).toContain('web: degraded (1/3) on a, b, c\n');
    expect(stdout).toContain('  replica alc_2 on b: running, unhealthy');
    expect(stdout).toContain('  replica alc_3 on c: unknown NODE_UNREACHABLE');
    expect(stdout).not.toContain('alc_1');
    expect(stdout).not.toContain('alc_4');
  });

  it('NODE says how many nodes past three, and the home node for a service without allocations', async () => {
    const wide = { ...web, serviceId: 's2', name: 'wide', allocations: ['a', 'b', 'c', 'd', 'd'].map((n, i) => replica(`alc_w${i}`, n)) };
    const single = { ...web, serviceId: 's3', name: 'single', allocations: [] };
    answers['/v1/status'] = { services: [wide, single] };
    try {
      const { code, stdout } = await run(['status']);
      expect(code).toBe(0);
      const lines = stdout.trimEnd().split('\n');
      expect(lines[1]).toMatch(/^wide +degraded +1\/3 +4 nodes +/);
      expect(lines[2]).toMatch(/^single +degraded +1\/3 +a +/);
    } finally {
      answers['/v1/status'] = { services: [web] };
    }
  });

  it('a service without a node yet: NODE -, state pending, a line per replica waiting with its reason', async () => {
    const waiting = {
      allocationId: null,
      node: null,
      desired: 'run',
      state: 'pending',
      deploymentId: null,
      runningDeploymentId: null,
      health: null,
      code: 'NO_NODE_MATCHES_LABELS',
      reason: 'no live node that takes new replicas carries gpu=yes',
      evidence: null,
      movedFrom: null,
    };
    const early = { ...web, serviceId: 's4', name: 'early', node: null, state: 'pending', desiredReplicas: 2, runningReplicas: 0, unknownReplicas: 0, evidence: null, reason: '0/2 running: no node yet, 2 pending', allocations: [waiting, waiting] };
    answers['/v1/status'] = { services: [early] };
    try {
      const { code, stdout } = await run(['status']);
      expect(code).toBe(0);
      const lines = stdout.trimEnd().split('\n');
      expect(lines[1]).toMatch(/^early +pending +0\/2 +- +/);
      expect(lines.slice(2)).toEqual(Array(2).fill('  ↳ replica not placed: pending NO_NODE_MATCHES_LABELS: no live node that takes new replicas carries gpu=yes'));
    } finally {
      answers['/v1/status'] = { services: [web] };
    }
  });
});
