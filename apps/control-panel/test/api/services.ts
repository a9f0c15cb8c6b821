import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { code, errorOf, sharedPostgres, startRestPanel, type RestPanel } from '../helpers/rest-harness.js';

// Services CRUD: validation of the spec, placement on nodes, name uniqueness
// per team, and the events the session layer acts on (after the commit).

describe('services API', () => {
  let p: RestPanel;
  let team: { id: string; token: string };

  beforeAll(async () => {
    p = await startRestPanel({ pg: await sharedPostgres() });
    team = await p.team('svc-team');
  });

  afterAll(async () => {
    await p?.close();
  });

  const create = (body: unknown, token = team.token) => p.call('POST', '/v1/services', { token, body });

  describe('placement', () => {
    // Issue 36, capacity honest: it was 409 NO_NODE_AVAILABLE with nothing stored.
    it('with no node at all: 201 without a node, its replicas pending NO_NODE_AVAILABLE (status says so); no node is told', async () => {
      p.emitted.length = 0;
      const made = await create({ name: 'early', image: 'nginx', replicas: 2 });
      expect(made.status).toBe(201);
      expect(made.body).toMatchObject({ nodeId: null, nodeName: null, pending: { count: 2, code: 'NO_NODE_AVAILABLE', message: expect.stringContaining('register one') } });
      // No node has it: no workload set changes (the scheduler is nudged instead).
      expect(p.emitted).toEqual([]);
      const status = await p.call('GET', `/v1/services/${made.body.id}/status`, { token: team.token });
      expect(status.status).toBe(200);
      expect(status.body).toMatchObject({ node: null, state: 'pending', desiredReplicas: 2, runningReplicas: 0, unknownReplicas: 0 });
      expect(status.body.allocations).toEqual([0, 1].map(() => expect.objectContaining({ allocationId: null, node: null, state: 'pending', code: 'NO_NODE_AVAILABLE' })));
      const all = await p.call('GET', '/v1/status', { token: team.token });
      expect(all.body.services.map((s: { name: string; state: string }) => [s.name, s.state])).toEqual([['early', 'pending']]);
      // A deployment is accepted and waits for the scheduler; routes and logs need a node.
      const deployed = await p.call('POST', `/v1/services/${made.body.id}/deployments`, { token: team.token });
      expect(deployed.status).toBe(201);
      expect(deployed.body).toMatchObject({ status: 'pending', nodeId: null });
      expect(await code(p.call('POST', '/v1/routes', { token: team.token, body: { domain: 'early.example.com', serviceId: made.body.id } }))).toMatchObject({ status: 409, code: 'SERVICE_PENDING' });
      expect(await code(p.call('GET', `/v1/services/${made.body.id}/logs`, { token: team.token }))).toMatchObject({ status: 409, code: 'SERVICE_PENDING' });
      expect((await p.call('DELETE', `/v1/services/${made.body.id}`, { token: team.token })).status).toBe(204);
      expect(await p.prisma.service.count()).toBe(0);
    });

    it('without a node name: the non-decommissioned node with the fewest services (ties by name)', async () => {
      const alpha = await p.node('alpha');
      const beta = await p.node('beta');
      const gamma = await p.node('gamma');
      await p.call('DELETE', `/v1/nodes/${alpha.id}`);
      const placed: string[] = [];
      for (const name of ['p1', 'p2', 'p3']) placed.push((await create({ name, image: 'nginx' })).body.nodeName);
      // alpha is decommissioned; beta and gamma take turns, beta first by name.
      expect(placed).toEqual(['beta', 'gamma', 'beta']);
      const named = await create({ name: 'p4', image: 'nginx', node: 'gamma' });
      expect(named.body).toMatchObject({ nodeId: gamma.id, nodeName: 'gamma' });
      expect(beta.id).not.toBe(gamma.id);
    });

    it('a named node must exist (400 UNKNOWN_NODE) and not be decommissioned (409 NODE_DECOMMISSIONED)', async () => {
      expect(await code(create({ name: 'x1', image: 'nginx', node: 'nowhere' }))).toMatchObject({ status: 400, code: 'UNKNOWN_NODE' });
      expect(await code(create({ name: 'x2', image: 'nginx', node: 'alpha' }))).toMatchObject({ status: 409, code: 'NODE_DECOMMISSIONED' });
    });
  });

  describe('placement by node names and labels', () => {
    // Nodes of their own, told apart from the other tests' nodes by labels only they carry.
    let ids: Record<string, string>;
    beforeAll(async () => {
      ids = {};
      for (const [name, zone] of [['pl-1', 'pl-x'], ['pl-2', 'pl-x'], ['pl-3', 'pl-y']] as const) {
        const res = await p.call('POST', '/v1/nodes', { body: { name, labels: { zone, 'disk.example.com/kind': 'ssd' } } });
        expect(res.status).toBe(201);
        ids[name] = res.body.id;
      }
    });

    it('labels: the eligible node that carries them with the fewest services (ties by name); the answer shows the placement', async () => {
      const placed: string[] = [];
      for (const name of ['lx1', 'lx2', 'lx3']) {
        const res = await create({ name, image: 'nginx', placement: { labels: { zone: 'pl-x' } } });
        expect(res.status).toBe(201);
        expect(res.body.placement).toEqual({ nodes: [], labels: { zone: 'pl-x' } });
        placed.push(res.body.nodeName);
      }
      expect(placed).toEqual(['pl-1', 'pl-2', 'pl-1']);
      const both = await create({ name: 'ly1', image: 'nginx', placement: { nodes: ['pl-2', 'pl-3'], labels: { zone: 'pl-y', 'disk.example.com/kind': 'ssd' } } });
      expect(both.body).toMatchObject({ nodeName: 'pl-3', placement: { nodes: ['pl-2', 'pl-3'], labels: { zone: 'pl-y', 'disk.example.com/kind': 'ssd' } } });
    });

    // Issue 36, capacity honest: each was 409 NO_NODE_MATCHES_LABELS with nothing stored.
    it('nothing carries the labels: 201 without a node, pending NO_NODE_MATCHES_LABELS; a named node without them too; an unknown name is still 400', async () => {
      const before = await p.prisma.service.count();
      const none = await create({ name: 'lz', image: 'nginx', placement: { labels: { zone: 'pl-z' } } });
      expect(none.status).toBe(201);
      expect(none.body).toMatchObject({ nodeId: null, nodeName: null, pending: { count: 1, code: 'NO_NODE_MATCHES_LABELS', message: expect.stringContaining('zone=pl-z') } });
      const among = await create({ name: 'lz2', image: 'nginx', placement: { nodes: ['pl-1', 'pl-2'], labels: { zone: 'pl-y' } } });
      expect(among.body).toMatchObject({ nodeName: null, pending: { code: 'NO_NODE_MATCHES_LABELS' } });
      const named = await create({ name: 'lz3', image: 'nginx', node: 'pl-1', placement: { labels: { zone: 'pl-y' } } });
      expect(named.body).toMatchObject({ nodeName: null, pending: { code: 'NO_NODE_MATCHES_LABELS' } });
      expect(await code(create({ name: 'lz4', image: 'nginx', placement: { nodes: ['pl-1', 'nowhere'] } }))).toMatchObject({ status: 400, code: 'UNKNOWN_NODE' });
      expect(await p.prisma.service.count()).toBe(before + 3);
      for (const made of [none, among, named]) await p.call('DELETE', `/v1/services/${made.body.id}`, { token: team.token });
    });

    it.each([
      ['node and placement.nodes that disagree', { node: 'pl-1', placement: { nodes: ['pl-2'] } }],
      ['an empty node list', { placement: { nodes: [] } }],
      ['a node named twice', { placement: { nodes: ['pl-1', 'pl-1'] } }],
      ['a bad label key', { placement: { labels: { 'bad key': 'x' } } }],
      ['a bad label value', { placement: { labels: { zone: 'a/b' } } }],
      ['an unknown placement field', { placement: { spread: true } }],
      ['a placement that is not an object', { placement: ['pl-1'] }],
    ])('refuses %s: 400 VALIDATION_FAILED', async (_what, body) => {
      expect(await code(create({ name: 'bad-placement', image: 'nginx', ...body }))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
    });

    it('PATCH: a node that still fits keeps the service; one that does not moves it; node alone keeps the labels', async () => {
      const made = await create({ name: 'lm', image: 'nginx', placement: { labels: { zone: 'pl-x' } } });
      const from = made.body.nodeName as string;
      const patch = (body: unknown) => p.call('PATCH', `/v1/services/${made.body.id}`, { token: team.token, body });
      p.emitted.length = 0;
      // Still fits (the same zone, and a label every pl- node carries): stored, nothing moves.
      const kept = await patch({ placement: { labels: { zone: 'pl-x', 'disk.example.com/kind': 'ssd' } } });
      expect(kept.body).toMatchObject({ nodeName: from, placement: { nodes: [], labels: { zone: 'pl-x', 'disk.example.com/kind': 'ssd' } } });
      expect(p.emitted.filter((e) => e.name === 'workloads.changed').map((e) => (e.payload as { reason: string }).reason)).toEqual(['service lm updated']);
      // Another zone: it moves to the only node there.
      p.emitted.length = 0;
      const moved = await patch({ placement: { labels: { zone: 'pl-y' } } });
      expect(moved.body).toMatchObject({ nodeName: 'pl-3', placement: { nodes: [], labels: { zone: 'pl-y' } } });
      expect(p.emitted.filter((e) => e.name === 'workloads.changed').map((e) => (e.payload as { nodeId: string }).nodeId)).toEqual([ids[from], ids['pl-3']]);
      // node alone: the labels stay, so a node without them is refused and nothing changes.
      expect(await code(patch({ node: 'pl-1' }))).toMatchObject({ status: 409, code: 'NO_NODE_MATCHES_LABELS' });
      expect((await p.call('GET', `/v1/services/${made.body.id}`, { token: team.token })).body).toMatchObject({ nodeName: 'pl-3', placement: { nodes: [], labels: { zone: 'pl-y' } } });
      // A placement replaced whole: labels left out are gone, so pl-1 is allowed.
      expect((await patch({ placement: { nodes: ['pl-1'] } })).body).toMatchObject({ nodeName: 'pl-1', placement: { nodes: ['pl-1'], labels: {} } });
      expect((await patch({ node: 'pl-2' })).body).toMatchObject({ nodeName: 'pl-2', placement: { nodes: ['pl-2'], labels: {} } });
    });

    it('a cordoned node keeps what runs there when the placement still names it; a move away from it is a placement', async () => {
      const made = await create({ name: 'lc', image: 'nginx', node: 'pl-3' });
      await p.call('POST', `/v1/nodes/${ids['pl-3']}/cordon`);
      try {
        const patch = (body: unknown) => p.call('PATCH', `/v1/services/${made.body.id}`, { token: team.token, body });
        expect((await patch({ placement: { nodes: ['pl-3', 'pl-2'] } })).body.nodeName).toBe('pl-3');
        // Issue 36, capacity honest: it was 409 NO_NODE_AVAILABLE.
        const waiting = await create({ name: 'lc2', image: 'nginx', placement: { labels: { zone: 'pl-y' } } });
        expect(waiting.body).toMatchObject({ nodeName: null, pending: { code: 'NO_NODE_AVAILABLE', message: expect.stringMatching(/cordoned/) } });
        await p.call('DELETE', `/v1/services/${waiting.body.id}`, { token: team.token });
        expect((await patch({ placement: { nodes: ['pl-2'] } })).body.nodeName).toBe('pl-2');
      } finally {
        await p.call('POST', `/v1/nodes/${ids['pl-3']}/uncordon`);
      }
    });
  });

  describe('create', () => {
    it('stores the spec with defaults and answers it; emits workloads.changed for its node', async () => {
      p.emitted.length = 0;
      const res = await create({ name: 'api', image: 'ghcr.io/acme/api:v1', env: { DATABASE_URL: 'postgres://x', _X: '' }, internalPort: 8080, node: 'beta' });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({
        id: expect.any(String),
        teamId: team.id,
        name: 'api',
        image: 'ghcr.io/acme/api:v1',
        env: { DATABASE_URL: 'postgres://x', _X: '' },
        internalPort: 8080,
        replicas: 1,
        secrets: [],
        command: null,
        args: null,
        resources: null,
        volumes: [],
        healthCheck: null,
        drainSeconds: 30,
        failover: { fence: false },
        rollout: { maxSurge: null, maxUnavailable: null, progressDeadlineSeconds: null },
        placement: { nodes: ['beta'], labels: {} },
        nodeId: expect.any(String),
        nodeName: 'beta',
        pending: null,
        createdAt: expect.any(String),
        updatedAt: expect.any(String),
      });
      expect(p.emitted).toEqual([{ name: 'workloads.changed', payload: { nodeId: res.body.nodeId, reason: 'service api created' } }]);
      const bare = await create({ name: 'bare', image: 'nginx' });
      expect(bare.body).toMatchObject({ env: {}, internalPort: null, replicas: 1 });
    });

    it('a name is unique per team (409 CONFLICT) but another team may use it', async () => {
      expect(await code(create({ name: 'api', image: 'nginx' }))).toMatchObject({ status: 409, code: 'CONFLICT' });
      const other = await p.team('svc-other');
      expect((await create({ name: 'api', image: 'nginx' }, other.token)).status).toBe(201);
    });

    it('operators name the team (required), customers may not name another one (404)', async () => {
      expect(await code(create({ name: 'op1', image: 'nginx' }, p.operator))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
      expect(await code(create({ name: 'op1', image: 'nginx', teamId: 'nope' }, p.operator))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
      const made = await create({ name: 'op1', image: 'nginx', teamId: team.id }, p.operator);
      expect(made.body).toMatchObject({ teamId: team.id, name: 'op1' });
      const other = await p.team('svc-third');
      expect(await code(create({ name: 'steal', image: 'nginx', teamId: other.id }))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
      expect((await create({ name: 'own', image: 'nginx', teamId: team.id })).status).toBe(201);
    });

    const tooManyEnv = Object.fromEntries(Array.from({ length: 101 }, (_, i) => [`K${i}`, 'v']));
    it.each([
      ['no image', { name: 'a' }],
      ['no name', { image: 'nginx' }],
      ['an uppercase name', { name: 'Web', image: 'nginx' }],
      ['a name with a dot', { name: 'web.app', image: 'nginx' }],
      ['a name of 64 characters', { name: 'a'.repeat(64), image: 'nginx' }],
      ['an image with a space', { name: 'a', image: 'nginx latest' }],
      ['an image with a shell metacharacter', { name: 'a', image: 'nginx;id' }],
      ['an uppercase image repository', { name: 'a', image: 'Nginx' }],
      ['an image over 512 characters', { name: 'a', image: `r/${'a'.repeat(520)}` }],
      ['an env key starting with a digit', { name: 'a', image: 'nginx', env: { '1A': 'x' } }],
      ['an env key with a dash', { name: 'a', image: 'nginx', env: { 'A-B': 'x' } }],
      ['an env key with "="', { name: 'a', image: 'nginx', env: { 'A=B': 'x' } }],
      ['an empty env key', { name: 'a', image: 'nginx', env: { '': 'x' } }],
      ['an env key of 257 characters', { name: 'a', image: 'nginx', env: { ['K'.repeat(257)]: 'x' } }],
      ['a number as env value', { name: 'a', image: 'nginx', env: { A: 1 } }],
      ['a NUL in an env value', { name: 'a', image: 'nginx', env: { A: 'x\u0000y' } }],
      ['an env value over 32 KiB', { name: 'a', image: 'nginx', env: { A: 'x'.repeat(32_769) } }],
      ['101 env variables', { name: 'a', image: 'nginx', env: tooManyEnv }],
      ['env as an array', { name: 'a', image: 'nginx', env: ['A=1'] }],
      ['internalPort 0', { name: 'a', image: 'nginx', internalPort: 0 }],
      ['internalPort 65536', { name: 'a', image: 'nginx', internalPort: 65_536 }],
      ['internalPort as a string', { name: 'a', image: 'nginx', internalPort: '80' }],
      ['internalPort 80.5', { name: 'a', image: 'nginx', internalPort: 80.5 }],
      ['replicas -1', { name: 'a', image: 'nginx', replicas: -1 }],
      ['replicas 101', { name: 'a', image: 'nginx', replicas: 101 }],
      ['a node name with spaces', { name: 'a', image: 'nginx', node: 'my node' }],
      ['an unknown field', { name: 'a', image: 'nginx', ports: [80] }],
    ])('refuses %s: 400 VALIDATION_FAILED', async (_what, body) => {
      expect(await code(create(body))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
    });

    it('accepts the bounds: replicas 0 and 20, ports 1 and 65535, 100 variables', async () => {
      const env = Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`K${i}`, 'v']));
      expect((await create({ name: 'b1', image: 'nginx', replicas: 0, internalPort: 1, env })).status).toBe(201);
      expect((await create({ name: 'b2', image: 'nginx', replicas: 100, internalPort: 65_535 })).status).toBe(201);
    });
  });

  describe('read, list', () => {
    it('GET /v1/services/:id and GET /v1/services; operators filter by ?teamId=', async () => {
      const made = await create({ name: 'readme', image: 'nginx' });
      const one = await p.call('GET', `/v1/services/${made.body.id}`, { token: team.token });
      expect(one.body).toEqual(made.body);
      const mine = await p.call('GET', '/v1/services', { token: team.token });
      expect(mine.body.every((s: { teamId: string }) => s.teamId === team.id)).toBe(true);
      expect(mine.body.map((s: { name: string }) => s.name)).toContain('readme');
      const all = await p.call('GET', '/v1/services');
      expect(new Set(all.body.map((s: { teamId: string }) => s.teamId)).size).toBeGreaterThan(1);
      const filtered = await p.call('GET', `/v1/services?teamId=${team.id}`);
      expect(filtered.body).toEqual(mine.body);
      expect(await code(p.call('GET', '/v1/services?color=blue'))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
      expect(await code(p.call('GET', '/v1/services/nope', { token: team.token }))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
      expect(await code(p.call('GET', '/v1/services', { token: null }))).toMatchObject({ status: 401 });
    });
  });

  describe('update', () => {
    it('changes only the fields given; env is replaced; workloads.changed; no routing change without routes', async () => {
      const made = await create({ name: 'upd', image: 'nginx:1', env: { A: '1', B: '2' }, internalPort: 80, node: 'beta' });
      p.emitted.length = 0;
      const res = await p.call('PATCH', `/v1/services/${made.body.id}`, { token: team.token, body: { image: 'nginx:2', env: { C: '3' } } });
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ name: 'upd', image: 'nginx:2', env: { C: '3' }, internalPort: 80, replicas: 1, nodeName: 'beta' });
      expect(p.emitted).toEqual([{ name: 'workloads.changed', payload: { nodeId: made.body.nodeId, reason: 'service upd updated' } }]);
      const cleared = await p.call('PATCH', `/v1/services/${made.body.id}`, { token: team.token, body: { internalPort: null } });
      expect(cleared.body.internalPort).toBeNull();
    });

    it('moving a service with routes: workloads.changed on both nodes and routing.changed naming both', async () => {
      const made = await create({ name: 'mover', image: 'nginx', internalPort: 80, node: 'beta' });
      expect((await p.call('POST', '/v1/routes', { token: team.token, body: { domain: 'mover.example.com', serviceId: made.body.id } })).status).toBe(201);
      const nodes = (await p.call('GET', '/v1/nodes')).body as { id: string; name: string }[];
      const id = (name: string) => nodes.find((n) => n.name === name)!.id;
      p.emitted.length = 0;
      const res = await p.call('PATCH', `/v1/services/${made.body.id}`, { token: team.token, body: { node: 'gamma' } });
      expect(res.body).toMatchObject({ nodeName: 'gamma', nodeId: id('gamma') });
      expect(p.emitted).toEqual([
        { name: 'workloads.changed', payload: { nodeId: id('beta'), reason: 'service mover moved away' } },
        { name: 'workloads.changed', payload: { nodeId: id('gamma'), reason: 'service mover moved here' } },
        { name: 'routing.changed', payload: { nodeIds: [id('beta'), id('gamma')], reason: 'service mover moved' } },
      ]);
      p.emitted.length = 0;
      await p.call('PATCH', `/v1/services/${made.body.id}`, { token: team.token, body: { internalPort: 8080 } });
      expect(p.emitted).toContainEqual({ name: 'routing.changed', payload: { nodeIds: [id('gamma')], reason: 'service mover port 8080' } });
      p.emitted.length = 0;
      await p.call('PATCH', `/v1/services/${made.body.id}`, { token: team.token, body: { replicas: 3 } });
      expect(p.emitted.map((e) => e.name)).toEqual(['workloads.changed']);
    });

    it('refuses an empty patch, bad fields, a taken name, unknown and decommissioned nodes', async () => {
      const made = await create({ name: 'upd2', image: 'nginx', node: 'beta' });
      const patch = (body: unknown) => p.call('PATCH', `/v1/services/${made.body.id}`, { token: team.token, body });
      expect(await code(patch({}))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
      expect(await code(patch({ replicas: 101 }))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
      expect(await code(patch({ image: 'a b' }))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
      expect(await code(patch({ teamId: 'x' }))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
      expect(await code(patch({ name: 'api' }))).toMatchObject({ status: 409, code: 'CONFLICT' });
      expect(await code(patch({ node: 'nowhere' }))).toMatchObject({ status: 400, code: 'UNKNOWN_NODE' });
      expect(await code(patch({ node: 'alpha' }))).toMatchObject({ status: 409, code: 'NODE_DECOMMISSIONED' });
      expect(await code(p.call('PATCH', '/v1/services/nope', { token: team.token, body: { replicas: 1 } }))).toMatchObject({ status: 404 });
      expect(await code(p.call('PATCH', `/v1/services/${made.body.id}`, { token: null, body: { replicas: 1 } }))).toMatchObject({ status: 401 });
    });
  });

  describe('rollout', () => {
    const DEFAULTS = { maxSurge: null, maxUnavailable: null, progressDeadlineSeconds: null };
    const field = (answer: { body: { error?: { details?: { field?: string } } } }) => answer.body.error?.details?.field;
    const patchOf = (id: string) => (body: unknown) => p.call('PATCH', `/v1/services/${id}`, { token: team.token, body });

    it('stores and answers rollout on create and PATCH (a PATCH replaces it whole, null: the defaults); a deployment carries it in its spec', async () => {
      const made = await create({ name: 'ro1', image: 'nginx', node: 'beta', replicas: 4, rollout: { maxSurge: 2, progressDeadlineSeconds: 30 } });
      expect(made.status).toBe(201);
      expect(made.body.rollout).toEqual({ maxSurge: 2, maxUnavailable: null, progressDeadlineSeconds: 30 });
      expect((await p.call('GET', `/v1/services/${made.body.id}`, { token: team.token })).body.rollout).toEqual(made.body.rollout);
      const patch = patchOf(made.body.id);
      expect((await patch({ rollout: { maxSurge: 0, maxUnavailable: 1 } })).body.rollout).toEqual({ maxSurge: 0, maxUnavailable: 1, progressDeadlineSeconds: null });
      // Another field left alone keeps it.
      expect((await patch({ replicas: 5 })).body.rollout).toEqual({ maxSurge: 0, maxUnavailable: 1, progressDeadlineSeconds: null });
      const deployed = await p.call('POST', `/v1/services/${made.body.id}/deployments`, { token: team.token });
      expect(deployed.body.spec.rollout).toEqual({ maxSurge: 0, maxUnavailable: 1, progressDeadlineSeconds: null });
      expect((await patch({ rollout: null })).body.rollout).toEqual(DEFAULTS);
      expect((await patch({ rollout: { maxSurge: 100, maxUnavailable: 100, progressDeadlineSeconds: 86_400 } })).body.rollout).toEqual({ maxSurge: 100, maxUnavailable: 100, progressDeadlineSeconds: 86_400 });
      expect((await create({ name: 'ro2', image: 'nginx', node: 'beta', rollout: null })).body.rollout).toEqual(DEFAULTS);
    });

    it.each([
      ['maxSurge -1', { maxSurge: -1 }],
      ['maxSurge 101', { maxSurge: 101 }],
      ['maxUnavailable 1.5', { maxUnavailable: 1.5 }],
      ['maxSurge as a string', { maxSurge: '25%' }],
      ['progressDeadlineSeconds 0', { progressDeadlineSeconds: 0 }],
      ['progressDeadlineSeconds 86401', { progressDeadlineSeconds: 86_401 }],
      ['an unknown field', { minReadySeconds: 5 }],
    ])('refuses %s: 400 VALIDATION_FAILED', async (_what, rollout) => {
      expect(await code(create({ name: 'ro-bad', image: 'nginx', node: 'beta', rollout }))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
    });

    it('maxSurge and maxUnavailable both 0 (given or by default): 400 naming the field, nothing stored or changed', async () => {
      const before = await p.prisma.service.count();
      for (const [rollout, named] of [
        [{ maxSurge: 0, maxUnavailable: 0 }, 'rollout.maxSurge'],
        [{ maxSurge: 0 }, 'rollout.maxSurge'],
      ] as const) {
        const res = await create({ name: 'ro-zero', image: 'nginx', node: 'beta', rollout });
        expect(errorOf(res)).toMatchObject({ status: 400, code: 'VALIDATION_FAILED', message: expect.stringContaining('cannot both be 0') });
        expect(field(res)).toBe(named);
      }
      expect(await p.prisma.service.count()).toBe(before);
      const made = await create({ name: 'ro3', image: 'nginx', node: 'beta', rollout: { maxSurge: 3 } });
      const res = await patchOf(made.body.id)({ rollout: { maxSurge: 0 } });
      expect(errorOf(res)).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
      expect((await p.call('GET', `/v1/services/${made.body.id}`, { token: team.token })).body.rollout).toEqual({ maxSurge: 3, maxUnavailable: null, progressDeadlineSeconds: null });
    });

    it('a writable volume or failover.fence refuses a surge, whichever comes first; 0 and 1 (their defaults) are taken', async () => {
      const volume = [{ name: 'data', mountPath: '/data' }];
      const surge = await create({ name: 'ro-vol', image: 'nginx', node: 'beta', volumes: volume, rollout: { maxSurge: 1 } });
      expect(errorOf(surge)).toMatchObject({ status: 400, code: 'VALIDATION_FAILED', message: expect.stringContaining('writable volume rolls out with maxSurge 0') });
      expect(field(surge)).toBe('rollout.maxSurge');
      // maxUnavailable 0 with the default maxSurge 0 of a writable volume: nothing could move.
      expect(field(await create({ name: 'ro-vol', image: 'nginx', node: 'beta', volumes: volume, rollout: { maxUnavailable: 0 } }))).toBe('rollout.maxUnavailable');
      expect((await create({ name: 'ro-vol', image: 'nginx', node: 'beta', volumes: volume, rollout: { maxSurge: 0, maxUnavailable: 1, progressDeadlineSeconds: 60 } })).status).toBe(201);
      const read = await create({ name: 'ro-read', image: 'nginx', node: 'beta', volumes: [{ ...volume[0], readOnly: true }], rollout: { maxSurge: 2 } });
      expect(read.status).toBe(201);
      const fenced = await create({ name: 'ro-fence', image: 'nginx', node: 'beta', failover: { fence: true }, rollout: { maxSurge: 2 } });
      expect(errorOf(fenced)).toMatchObject({ status: 400, message: expect.stringContaining('fenced service rolls out with maxSurge 0') });
      // A surge set before: adding a writable volume or the fence is refused until the rollout says maxSurge 0.
      const web = await create({ name: 'ro-web', image: 'nginx', node: 'beta', rollout: { maxSurge: 2 } });
      const patch = patchOf(web.body.id);
      expect(field(await patch({ volumes: volume }))).toBe('rollout.maxSurge');
      expect(field(await patch({ failover: { fence: true } }))).toBe('rollout.maxSurge');
      // null: the defaults, 0 and 1 for a fenced service.
      expect((await patch({ failover: { fence: true }, rollout: null })).body).toMatchObject({ failover: { fence: true }, rollout: DEFAULTS });
    });

    it('a rollback keeps the service\'s rollout, and refuses one that brings a writable volume back under a surge', async () => {
      const made = await create({ name: 'ro-back', image: 'nginx:1', node: 'beta', volumes: [{ name: 'data', mountPath: '/data' }] });
      const first = await p.call('POST', `/v1/services/${made.body.id}/deployments`, { token: team.token });
      await p.prisma.deployment.update({ where: { id: first.body.id }, data: { status: 'running', runningAt: new Date() } });
      const patch = patchOf(made.body.id);
      expect((await patch({ image: 'nginx:2', volumes: [], rollout: { maxSurge: 0, maxUnavailable: 2 } })).status).toBe(200);
      await p.call('POST', `/v1/services/${made.body.id}/deployments`, { token: team.token });
      const back = await p.call('POST', `/v1/services/${made.body.id}/rollback`, { token: team.token, body: {} });
      expect(back.body).toMatchObject({ rollbackOf: first.body.id, spec: { image: 'nginx:1', volumes: [{ name: 'data' }], rollout: { maxSurge: 0, maxUnavailable: 2, progressDeadlineSeconds: null } } });
      expect((await p.call('GET', `/v1/services/${made.body.id}`, { token: team.token })).body.rollout).toEqual({ maxSurge: 0, maxUnavailable: 2, progressDeadlineSeconds: null });
      // With a surge now, going back to the release with the writable volume is refused: nothing changes.
      expect((await patch({ volumes: [], rollout: { maxSurge: 1 } })).status).toBe(200);
      const refused = await p.call('POST', `/v1/services/${made.body.id}/rollback`, { token: team.token, body: { to: first.body.id } });
      expect(errorOf(refused)).toMatchObject({ status: 400, code: 'VALIDATION_FAILED', message: expect.stringContaining('writable volume') });
      expect((await p.call('GET', `/v1/services/${made.body.id}`, { token: team.token })).body).toMatchObject({ volumes: [], rollout: { maxSurge: 1 } });
    });
  });

  describe('delete', () => {
    it('removes the service with its routes and deployments; workloads.changed and routing.changed', async () => {
      const made = await create({ name: 'gone', image: 'nginx', internalPort: 80, node: 'beta' });
      await p.call('POST', '/v1/routes', { token: team.token, body: { domain: 'gone.example.com', serviceId: made.body.id } });
      await p.call('POST', `/v1/services/${made.body.id}/deployments`, { token: team.token });
      p.emitted.length = 0;
      const res = await p.call('DELETE', `/v1/services/${made.body.id}`, { token: team.token });
      expect(res.status).toBe(204);
      expect(res.body).toBeNull();
      expect(p.emitted).toEqual([
        { name: 'workloads.changed', payload: { nodeId: made.body.nodeId, reason: 'service gone deleted' } },
        { name: 'routing.changed', payload: { nodeIds: [made.body.nodeId], reason: 'service gone deleted with its routes' } },
      ]);
      expect(await p.prisma.route.count({ where: { serviceId: made.body.id } })).toBe(0);
      expect(await p.prisma.deployment.count({ where: { serviceId: made.body.id } })).toBe(0);
      expect(await code(p.call('DELETE', `/v1/services/${made.body.id}`, { token: team.token }))).toMatchObject({ status: 404 });
      expect(await code(p.call('DELETE', '/v1/services/x', { token: null }))).toMatchObject({ status: 401 });
      // The domain is free again.
      const again = await create({ name: 'gone2', image: 'nginx', internalPort: 80, node: 'beta' });
      expect((await p.call('POST', '/v1/routes', { token: team.token, body: { domain: 'gone.example.com', serviceId: again.body.id } })).status).toBe(201);
    });
  });
});
