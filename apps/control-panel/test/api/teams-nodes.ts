import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashToken } from '../../src/domain/tokens.js';
import { code, sharedPostgres, startRestPanel, type RestPanel } from '../helpers/rest-harness.js';

// Operator endpoints: teams, customer tokens, nodes. Every endpoint: success,
// each validation error, 401 without a token, 403 for customers (see also
// auth.test.ts), 404 for missing ids.

describe('teams, tokens and nodes API', () => {
  let p: RestPanel;

  beforeAll(async () => {
    p = await startRestPanel({ pg: await sharedPostgres() });
  });

  afterAll(async () => {
    await p?.close();
  });


  describe('teams', () => {
    it('POST /v1/teams creates a team; the same name again is 409 CONFLICT', async () => {
      const res = await p.call('POST', '/v1/teams', { body: { name: 'acme' } });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({ id: expect.any(String), name: 'acme', createdAt: expect.any(String) });
      expect(await code(p.call('POST', '/v1/teams', { body: { name: 'acme' } }))).toMatchObject({ status: 409, code: 'CONFLICT' });
    });

    it.each([
      ['no body', undefined],
      ['no name', {}],
      ['a name that is not a label', { name: 'Acme Inc' }],
      ['a name with a trailing hyphen', { name: 'acme-' }],
      ['a name of 64 characters', { name: 'a'.repeat(64) }],
      ['a number for the name', { name: 5 }],
      ['an unknown field', { name: 'ok', admin: true }],
      ['an array body', ['acme']],
    ])('POST /v1/teams refuses %s: 400 VALIDATION_FAILED', async (_what, body) => {
      expect(await code(p.call('POST', '/v1/teams', { body }))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
    });

    it('refuses a body that is not JSON (400) or not application/json (415)', async () => {
      expect(await code(p.call('POST', '/v1/teams', { body: '{"name":', headers: { 'content-type': 'application/json' } }))).toMatchObject({
        status: 400,
        code: 'VALIDATION_FAILED',
      });
      expect(await code(p.call('POST', '/v1/teams', { body: 'name=acme', headers: { 'content-type': 'text/plain' } }))).toMatchObject({
        status: 415,
        code: 'UNSUPPORTED_MEDIA_TYPE',
      });
    });

    it('GET /v1/teams lists, GET /v1/teams/:id reads; unknown id 404, malformed id 400', async () => {
      const team = await p.team('listed');
      const list = await p.call('GET', '/v1/teams');
      expect(list.status).toBe(200);
      expect(list.body.map((t: { name: string }) => t.name)).toContain('listed');
      expect((await p.call('GET', `/v1/teams/${team.id}`)).body).toMatchObject({ id: team.id, name: 'listed' });
      expect((await p.call('GET', `/v1/teams/${team.id}`, { token: team.token })).body).toMatchObject({ id: team.id });
      expect(await code(p.call('GET', '/v1/teams/nope'))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
      expect(await code(p.call('GET', '/v1/teams/has%20space'))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
      expect(await code(p.call('GET', `/v1/teams/${team.id}`, { token: null }))).toMatchObject({ status: 401 });
    });
  });

  describe('customer tokens', () => {
    it('POST /v1/teams/:id/tokens answers the token once; it works for that team; listing never shows it', async () => {
      const team = await p.team('tokens');
      const res = await p.call('POST', `/v1/teams/${team.id}/tokens`, { body: { name: 'deploy bot' } });
      expect(res.status).toBe(201);
      expect(res.body).toMatchObject({ name: 'deploy bot', role: 'customer', teamId: team.id, revokedAt: null, lastUsedAt: null });
      expect(res.body.token).toMatch(/^tth_cu_/);
      expect((await p.prisma.apiToken.findUniqueOrThrow({ where: { id: res.body.id } })).tokenHash).toBe(hashToken(res.body.token));
      expect((await p.call('GET', '/v1/services', { token: res.body.token })).status).toBe(200);

      const list = await p.call('GET', `/v1/teams/${team.id}/tokens`);
      expect(list.status).toBe(200);
      expect(list.body).toHaveLength(2);
      expect(JSON.stringify(list.body)).not.toContain(res.body.token);
      expect(JSON.stringify(list.body)).not.toContain('tokenHash');
      for (const t of list.body) expect(Object.keys(t).sort()).toEqual(['createdAt', 'expiresAt', 'id', 'lastUsedAt', 'name', 'revokedAt', 'role', 'teamId']);
    });

    it.each([
      ['no name', {}],
      ['an empty name', { name: '' }],
      ['a name of 101 characters', { name: 'x'.repeat(101) }],
      ['a control character', { name: 'a\u0007b' }],
      ['a role (customer tokens only)', { name: 'x', role: 'operator' }],
    ])('POST /v1/teams/:id/tokens refuses %s: 400', async (_what, body) => {
      const team = await p.team(`tok-${Math.random().toString(36).slice(2, 8)}`);
      expect(await code(p.call('POST', `/v1/teams/${team.id}/tokens`, { body }))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
    });

    it('token endpoints answer 404 for unknown teams and tokens, 401 without a token', async () => {
      expect(await code(p.call('POST', '/v1/teams/nope/tokens', { body: { name: 'x' } }))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
      expect(await code(p.call('GET', '/v1/teams/nope/tokens'))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
      expect(await code(p.call('DELETE', '/v1/tokens/nope'))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
      expect(await code(p.call('DELETE', '/v1/tokens/a.b'))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
      expect(await code(p.call('DELETE', '/v1/tokens/nope', { token: null }))).toMatchObject({ status: 401 });
    });

    it('DELETE /v1/tokens/:id revokes, idempotently', async () => {
      const team = await p.team('revoking');
      const [row] = await p.prisma.apiToken.findMany({ where: { teamId: team.id } });
      const first = await p.call('DELETE', `/v1/tokens/${row!.id}`);
      expect(first.status).toBe(200);
      expect(first.body.revokedAt).toEqual(expect.any(String));
      const again = await p.call('DELETE', `/v1/tokens/${row!.id}`);
      expect(again.body.revokedAt).toBe(first.body.revokedAt);
    });
  });

  describe('nodes', () => {
    it('POST /v1/nodes answers { id, name, token } with the agent token once; only its hash is stored', async () => {
      const res = await p.call('POST', '/v1/nodes', { body: { name: 'node-a' } });
      expect(res.status).toBe(201);
      expect(Object.keys(res.body).sort()).toEqual(['id', 'name', 'token']);
      expect(res.body.token).toMatch(/^tth_node_/);
      expect((await p.prisma.node.findUniqueOrThrow({ where: { id: res.body.id } })).tokenHash).toBe(hashToken(res.body.token));
      expect(await code(p.call('POST', '/v1/nodes', { body: { name: 'node-a' } }))).toMatchObject({ status: 409, code: 'CONFLICT' });
    });

    it.each([
      ['no name', {}],
      ['uppercase', { name: 'Node-A' }],
      ['a dot', { name: 'node.a' }],
      ['a space', { name: 'node a' }],
      ['64 characters', { name: 'n'.repeat(64) }],
      ['an unknown field', { name: 'ok', token: 'mine' }],
    ])('POST /v1/nodes refuses %s: 400', async (_what, body) => {
      expect(await code(p.call('POST', '/v1/nodes', { body }))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
    });

    it('GET /v1/nodes and /v1/nodes/:id say what the database knows and never claim reachability', async () => {
      const node = await p.node('node-b');
      const one = await p.call('GET', `/v1/nodes/${node.id}`);
      expect(one.status).toBe(200);
      expect(one.body).toEqual({
        id: node.id,
        name: 'node-b',
        labels: {},
        cordoned: false,
        evacuating: false,
        decommissioned: false,
        decommissionedAt: null,
        lostAt: null,
        createdAt: expect.any(String),
        lastSeenAt: null,
        services: 0,
      });
      // Even a recent last-seen time in the database must not turn into "online".
      await p.prisma.node.update({ where: { id: node.id }, data: { lastSeenAt: new Date(), unreachableSince: null } });
      const listed = (await p.call('GET', '/v1/nodes')).body.find((n: { id: string }) => n.id === node.id);
      for (const key of Object.keys(listed)) expect(key).not.toMatch(/online|reachable|connected|alive|state/i);
      expect(await code(p.call('GET', '/v1/nodes/nope'))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
      expect(await code(p.call('GET', '/v1/nodes', { token: null }))).toMatchObject({ status: 401 });
    });

    it('labels: given at registration, merged by PATCH (a string sets, null removes, others kept), audited', async () => {
      const res = await p.call('POST', '/v1/nodes', { body: { name: 'node-l', labels: { zone: 'a', 'tether.io/ingress': 'true', disk: '' } } });
      expect(res.status).toBe(201);
      expect((await p.call('GET', `/v1/nodes/${res.body.id}`)).body.labels).toEqual({ zone: 'a', 'tether.io/ingress': 'true', disk: '' });
      const patched = await p.call('PATCH', `/v1/nodes/${res.body.id}`, { body: { labels: { zone: 'b', disk: null, 'gpu.example.com/model': 'a100' } } });
      expect(patched.status).toBe(200);
      expect(patched.body.labels).toEqual({ zone: 'b', 'tether.io/ingress': 'true', 'gpu.example.com/model': 'a100' });
      expect((await p.call('GET', '/v1/nodes')).body.find((n: { id: string }) => n.id === res.body.id).labels).toEqual(patched.body.labels);
      // No labels named: nothing changes, and an empty body is allowed.
      expect((await p.call('PATCH', `/v1/nodes/${res.body.id}`, { body: {} })).body.labels).toEqual(patched.body.labels);
      const rows = await p.prisma.auditEvent.findMany({ where: { targetId: res.body.id }, orderBy: { at: 'asc' } });
      expect(rows.map((r) => `${r.action} ${r.outcome}`)).toEqual(['node.create success', 'node.update success']);
      expect(await code(p.call('PATCH', '/v1/nodes/nope', { body: { labels: { zone: 'c' } } }))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
      const team = await p.team('labels-customer');
      expect(await code(p.call('PATCH', `/v1/nodes/${res.body.id}`, { token: team.token, body: { labels: { zone: 'c' } } }))).toMatchObject({ status: 403 });
    });

    it.each([
      ['a key with a space', { 'my zone': 'a' }],
      ['an empty key', { '': 'a' }],
      ['a key ending in "-"', { 'zone-': 'a' }],
      ['an uppercase prefix', { 'Example.com/zone': 'a' }],
      ['a name of 64 characters', { ['z'.repeat(64)]: 'a' }],
      ['a value of 64 characters', { zone: 'a'.repeat(64) }],
      ['a value with a slash', { zone: 'a/b' }],
      ['a number for a value', { zone: 1 }],
      ['33 labels', Object.fromEntries(Array.from({ length: 33 }, (_, i) => [`l${i}`, 'x']))],
    ])('labels refuse %s: 400 VALIDATION_FAILED, nothing stored', async (_what, labels) => {
      const name = `node-bad-${Math.round(Math.random() * 1e9)}`;
      expect(await code(p.call('POST', '/v1/nodes', { body: { name, labels } }))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
      expect(await p.prisma.node.count({ where: { name } })).toBe(0);
      const node = await p.node(name);
      expect(await code(p.call('PATCH', `/v1/nodes/${node.id}`, { body: { labels } }))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
      expect((await p.call('GET', `/v1/nodes/${node.id}`)).body.labels).toEqual({});
    });

    it('PATCH refuses a merge that would leave more than 32 labels, and keeps the old ones', async () => {
      const full = Object.fromEntries(Array.from({ length: 32 }, (_, i) => [`l${i}`, 'x']));
      const res = await p.call('POST', '/v1/nodes', { body: { name: 'node-full', labels: full } });
      expect(res.status).toBe(201);
      expect(await code(p.call('PATCH', `/v1/nodes/${res.body.id}`, { body: { labels: { extra: 'y' } } }))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
      // Replacing one keeps the count: allowed.
      expect((await p.call('PATCH', `/v1/nodes/${res.body.id}`, { body: { labels: { l0: null, extra: 'y' } } })).body.labels).toMatchObject({ extra: 'y' });
      expect((await p.call('GET', `/v1/nodes/${res.body.id}`)).body.labels).not.toHaveProperty('l0');
    });

    it('cordon: automatic placement skips the node, naming it is 409 NODE_CORDONED, what runs there still deploys; uncordon lifts it', async () => {
      // A pool of its own: every other node of this file cordoned meanwhile would make the test depend on them.
      const others = await p.prisma.node.findMany({ where: { decommissioned: false, cordoned: false } });
      await p.prisma.node.updateMany({ where: { id: { in: others.map((n) => n.id) } }, data: { cordoned: true } });
      try {
        const a = await p.node('cordon-a');
        const b = await p.node('cordon-b');
        const team = await p.team('cordon');
        const onA = await p.call('POST', '/v1/services', { token: team.token, body: { name: 'on-a', image: 'nginx', node: 'cordon-a' } });
        expect(onA.status).toBe(201);

        const cordoned = await p.call('POST', `/v1/nodes/${a.id}/cordon`);
        expect(cordoned.status).toBe(200);
        expect(cordoned.body).toMatchObject({ id: a.id, cordoned: true, decommissioned: false, services: 1 });
        expect((await p.call('POST', `/v1/nodes/${a.id}/cordon`)).body.cordoned).toBe(true);

        // cordon-b has more services now, and is still chosen: cordon-a is not a candidate.
        for (const name of ['auto-1', 'auto-2']) {
          const placed = await p.call('POST', '/v1/services', { token: team.token, body: { name, image: 'nginx' } });
          expect(placed.status).toBe(201);
          expect(placed.body.nodeName).toBe('cordon-b');
        }
        expect(await code(p.call('POST', '/v1/services', { token: team.token, body: { name: 'named', image: 'nginx', node: 'cordon-a' } }))).toMatchObject({
          status: 409,
          code: 'NODE_CORDONED',
        });
        // Moving a service onto it is a placement too; deploying one already there is not.
        const auto1 = (await p.call('GET', '/v1/services', { token: team.token })).body.find((x: { name: string }) => x.name === 'auto-1');
        expect(await code(p.call('PATCH', `/v1/services/${auto1.id}`, { token: team.token, body: { node: 'cordon-a' } }))).toMatchObject({ status: 409, code: 'NODE_CORDONED' });
        expect((await p.call('POST', `/v1/services/${onA.body.id}/deployments`, { token: team.token })).body.status).toBe('pending');

        await p.call('POST', `/v1/nodes/${b.id}/cordon`);
        // Issue 36, capacity honest: it was 409 NO_NODE_AVAILABLE; now made without a node, its replica pending.
        const none = await p.call('POST', '/v1/services', { token: team.token, body: { name: 'nowhere', image: 'nginx' } });
        expect(none.status).toBe(201);
        expect(none.body).toMatchObject({ nodeName: null, pending: { code: 'NO_NODE_AVAILABLE', message: expect.stringMatching(/cordoned/) } });
        await p.call('DELETE', `/v1/services/${none.body.id}`, { token: team.token });

        const lifted = await p.call('POST', `/v1/nodes/${a.id}/uncordon`);
        expect(lifted.body).toMatchObject({ cordoned: false, services: 1 });
        expect((await p.call('POST', '/v1/services', { token: team.token, body: { name: 'after', image: 'nginx' } })).body.nodeName).toBe('cordon-a');
        const rows = await p.prisma.auditEvent.findMany({ where: { targetId: a.id, action: { in: ['node.cordon', 'node.uncordon'] } }, orderBy: { at: 'asc' } });
        // The second cordon changed nothing: one row each.
        expect(rows.map((r) => r.action)).toEqual(['node.cordon', 'node.uncordon']);

        await p.call('DELETE', `/v1/nodes/${b.id}`);
        expect(await code(p.call('POST', `/v1/nodes/${b.id}/uncordon`))).toMatchObject({ status: 409, code: 'NODE_DECOMMISSIONED' });
        expect(await code(p.call('POST', '/v1/nodes/nope/cordon'))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
        expect(await code(p.call('POST', `/v1/nodes/${a.id}/cordon`, { token: team.token }))).toMatchObject({ status: 403 });
      } finally {
        await p.prisma.node.updateMany({ where: { id: { in: others.map((n) => n.id) } }, data: { cordoned: false } });
      }
    });

    it('DELETE /v1/nodes/:id decommissions: event after commit, pending deployments end failed, services stay, idempotent', async () => {
      const node = await p.node('node-c');
      const team = await p.team('decom');
      const service = await p.call('POST', '/v1/services', { token: team.token, body: { name: 'web', image: 'nginx', node: 'node-c' } });
      const deployment = await p.call('POST', `/v1/services/${service.body.id}/deployments`, { token: team.token });
      expect(deployment.body.status).toBe('pending');

      let committedWhenEmitted: boolean | undefined;
      p.events.once('node.decommissioned', () => {
        // A listener reading the database sees the committed state.
        void p.prisma.node.findUniqueOrThrow({ where: { id: node.id } }).then((n) => (committedWhenEmitted = n.decommissioned));
      });
      p.emitted.length = 0;
      const res = await p.call('DELETE', `/v1/nodes/${node.id}`);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ id: node.id, decommissioned: true, decommissionedAt: expect.any(String), services: 1 });
      expect(p.emitted).toEqual([{ name: 'node.decommissioned', payload: { nodeId: node.id } }]);
      await expect.poll(() => committedWhenEmitted).toBe(true);

      const ended = await p.call('GET', `/v1/deployments/${deployment.body.id}`, { token: team.token });
      expect(ended.body).toMatchObject({ status: 'failed', reason: 'the node was decommissioned', finishedAt: expect.any(String) });
      expect((await p.call('GET', `/v1/services/${service.body.id}`, { token: team.token })).status).toBe(200);

      p.emitted.length = 0;
      const again = await p.call('DELETE', `/v1/nodes/${node.id}`);
      expect(again.status).toBe(200);
      expect(again.body.decommissionedAt).toBe(res.body.decommissionedAt);
      expect(p.emitted).toEqual([]);
      expect(await code(p.call('DELETE', '/v1/nodes/nope'))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
    });
  });
});
