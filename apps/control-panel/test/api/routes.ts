import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { code, errorOf, sharedPostgres, startRestPanel, type RestPanel } from '../helpers/rest-harness.js';

// Routes: attach a domain to a service, list, read, detach. Domains reach the
// proxy configuration, so the API refuses anything but a lowercase host name.

describe('routes API', () => {
  let p: RestPanel;
  let team: { id: string; token: string };
  let service: { id: string; nodeId: string };

  beforeAll(async () => {
    p = await startRestPanel({ pg: await sharedPostgres() });
    team = await p.team('routes-team');
    await p.node('edge-1');
    service = (await p.call('POST', '/v1/services', { token: team.token, body: { name: 'shop', image: 'nginx', internalPort: 80 } })).body;
  });

  afterAll(async () => {
    await p?.close();
  });

  const attach = (body: unknown, token: string | null = team.token) => p.call('POST', '/v1/routes', { token, body });

  describe('attach', () => {
    it('attaches a domain (with or without a path prefix) and emits routing.changed for the node after the commit', async () => {
      p.emitted.length = 0;
      let seenInDb: number | undefined;
      p.events.once('routing.changed', () => {
        void p.prisma.route.count({ where: { domain: 'shop.example.com' } }).then((n) => (seenInDb = n));
      });
      const res = await attach({ domain: 'shop.example.com', serviceId: service.id });
      expect(res.status).toBe(201);
      expect(res.body).toEqual({ id: expect.any(String), domain: 'shop.example.com', pathPrefix: null, serviceId: service.id, createdAt: expect.any(String) });
      expect(p.emitted).toEqual([{ name: 'routing.changed', payload: { nodeIds: [service.nodeId], reason: 'attached shop.example.com' } }]);
      await expect.poll(() => seenInDb).toBe(1);
      const prefixed = await attach({ domain: 'api.example.com', serviceId: service.id, pathPrefix: '/v1/' });
      expect(prefixed.body.pathPrefix).toBe('/v1');
    });

    it("refuses Tether's reserved host suffix (the agents' canary) with 400 RESERVED_DOMAIN, and nothing is stored", async () => {
      for (const domain of ['tether.internal', 'canary.tether.internal', 'x.y.tether.internal']) {
        expect(await code(attach({ domain, serviceId: service.id })), domain).toMatchObject({ status: 400, code: 'RESERVED_DOMAIN' });
      }
      // Only the suffix as whole labels: a customer's own domain that merely ends in the letters is fine.
      const lookalike = await attach({ domain: 'mytether.internal', serviceId: service.id });
      expect(lookalike.status).toBe(201);
      const listed = await p.call('GET', `/v1/routes?serviceId=${service.id}`, { token: team.token });
      expect(listed.body.map((r: { domain: string }) => r.domain).filter((d: string) => d.endsWith('tether.internal'))).toEqual(['mytether.internal']);
      expect((await p.call('DELETE', `/v1/routes/${lookalike.body.id}`, { token: team.token })).status).toBe(204);
    });

    it('a domain attached elsewhere (any team, any service) is 409 DOMAIN_TAKEN', async () => {
      const other = await p.team('routes-other');
      const theirs = await p.call('POST', '/v1/services', { token: other.token, body: { name: 'shop', image: 'nginx' } });
      expect(await code(attach({ domain: 'shop.example.com', serviceId: theirs.body.id }, other.token))).toMatchObject({ status: 409, code: 'DOMAIN_TAKEN' });
      expect(await code(attach({ domain: 'shop.example.com', serviceId: service.id }))).toMatchObject({ status: 409, code: 'DOMAIN_TAKEN' });
    });

    it('two attaches of one domain at the same time: exactly one wins, the other is DOMAIN_TAKEN', async () => {
      const answers = await Promise.all([attach({ domain: 'race.example.com', serviceId: service.id }), attach({ domain: 'race.example.com', serviceId: service.id })]);
      expect(answers.map((a) => a.status).sort()).toEqual([201, 409]);
      expect(errorOf(answers.find((a) => a.status === 409)!).code).toBe('DOMAIN_TAKEN');
    });

    it('one domain, several path prefixes: /api to one service, the rest to another of the same team and node', async () => {
      const api = (await p.call('POST', '/v1/services', { token: team.token, body: { name: 'shop-api', image: 'nginx', internalPort: 8080 } })).body;
      const split = await attach({ domain: 'shop.example.com', serviceId: api.id, pathPrefix: '/api' });
      expect(split.status).toBe(201);
      // The same (domain, prefix) twice is taken, whichever service asks.
      expect(await code(attach({ domain: 'shop.example.com', serviceId: service.id, pathPrefix: '/api' }))).toMatchObject({ status: 409, code: 'DOMAIN_TAKEN' });
      // Another team may not put a prefix on this team's domain either.
      const other = await p.team('routes-prefix-other');
      const theirs = (await p.call('POST', '/v1/services', { token: other.token, body: { name: 'x', image: 'nginx', internalPort: 80 } })).body;
      expect(await code(attach({ domain: 'shop.example.com', serviceId: theirs.id, pathPrefix: '/blog' }, other.token))).toMatchObject({ status: 409, code: 'DOMAIN_TAKEN' });
      expect((await p.call('DELETE', `/v1/routes/${split.body.id}`, { token: team.token })).status).toBe(204);
    });

    it('one domain, services on two nodes (cross-node routing): each route is taken, a move takes along only the domains no other service routes', async () => {
      await p.node('edge-2');
      const far = (await p.call('POST', '/v1/services', { token: team.token, body: { name: 'far', image: 'nginx', internalPort: 80, node: 'edge-2' } })).body;
      expect(far.nodeId).not.toBe(service.nodeId);
      const farRoute = await attach({ domain: 'shop.example.com', serviceId: far.id, pathPrefix: '/far' });
      expect(farRoute.status).toBe(201);
      const near = (await p.call('POST', '/v1/services', { token: team.token, body: { name: 'near', image: 'nginx', internalPort: 80, node: 'edge-1' } })).body;
      const shared = await attach({ domain: 'shop.example.com', serviceId: near.id, pathPrefix: '/near' });
      expect(shared.status).toBe(201);
      // Moving one service of a shared domain moves the service; the domain's row stays where its first route put it.
      expect((await p.call('PATCH', `/v1/services/${near.id}`, { token: team.token, body: { node: 'edge-2' } })).status).toBe(200);
      expect(await p.prisma.domain.findUnique({ where: { name: 'shop.example.com' } })).toMatchObject({ nodeId: service.nodeId });
      // A domain that only this service routes moves with it.
      const solo = await attach({ domain: 'solo.example.com', serviceId: near.id });
      expect((await p.call('PATCH', `/v1/services/${near.id}`, { token: team.token, body: { node: 'edge-1' } })).status).toBe(200);
      expect(await p.prisma.domain.findUnique({ where: { name: 'solo.example.com' } })).toMatchObject({ nodeId: service.nodeId });
      for (const r of [shared, farRoute, solo]) expect((await p.call('DELETE', `/v1/routes/${r.body.id}`, { token: team.token })).status).toBe(204);
      // Its last route gone, the domain belongs to nobody.
      expect(await p.prisma.domain.findUnique({ where: { name: 'solo.example.com' } })).toBeNull();
    });

    it('two teams racing for one new domain: exactly one wins, the other is DOMAIN_TAKEN', async () => {
      const other = await p.team('routes-race-other');
      const theirs = (await p.call('POST', '/v1/services', { token: other.token, body: { name: 'y', image: 'nginx', internalPort: 80 } })).body;
      const answers = await Promise.all([
        attach({ domain: 'contest.example.com', serviceId: service.id, pathPrefix: '/a' }),
        attach({ domain: 'contest.example.com', serviceId: theirs.id, pathPrefix: '/b' }, other.token),
      ]);
      expect(answers.map((a) => a.status).sort()).toEqual([201, 409]);
      expect(errorOf(answers.find((a) => a.status === 409)!).code).toBe('DOMAIN_TAKEN');
      const won = answers.findIndex((a) => a.status === 201);
      expect((await p.call('DELETE', `/v1/routes/${answers[won]!.body.id}`, { token: won === 0 ? team.token : other.token })).status).toBe(204);
    });

    it('"/", up to three segments, underscores: stored in one form (whole domain null, lowercase, no trailing /)', async () => {
      const cases: Array<[string, string | null]> = [['/', null], ['/API/V1/', '/api/v1'], ['/a_b-c', '/a_b-c'], ['/x/y/z', '/x/y/z']];
      const ids: string[] = [];
      for (const [given, stored] of cases) {
        const res = await attach({ domain: 'forms.example.com', serviceId: service.id, pathPrefix: given });
        expect(res.status, given).toBe(201);
        expect(res.body.pathPrefix).toBe(stored);
        ids.push(res.body.id);
      }
      // `/api/v1/` and `/api/v1` are one route.
      expect(await code(attach({ domain: 'forms.example.com', serviceId: service.id, pathPrefix: '/api/v1' }))).toMatchObject({ status: 409, code: 'DOMAIN_TAKEN' });
      expect(await code(attach({ domain: 'forms.example.com', serviceId: service.id }))).toMatchObject({ status: 409, code: 'DOMAIN_TAKEN' });
      for (const id of ids) expect((await p.call('DELETE', `/v1/routes/${id}`, { token: team.token })).status).toBe(204);
      p.emitted.length = 0;
    });

    it.each([
      ['four segments', 'shape.example.com', '/a/b/c/d'],
      ['a tilde in the segment', 'shape.example.com', '/a~b'],
      ['a dot in the segment', 'shape.example.com', '/a.b'],
      ['a segment of 63 characters', 'shape.example.com', `/${'a'.repeat(63)}`],
      ['a domain and prefix longer than 232 characters', `${'a'.repeat(60)}.${'b'.repeat(60)}.${'c'.repeat(60)}.${'d'.repeat(41)}.com`, '/api'],
    ])('a new route with %s is 400 ROUTE_SHAPE_UNSUPPORTED, and nothing is stored', async (_what, domain, pathPrefix) => {
      const body = pathPrefix === null ? { domain, serviceId: service.id } : { domain, serviceId: service.id, pathPrefix };
      expect(await code(attach(body))).toMatchObject({ status: 400, code: 'ROUTE_SHAPE_UNSUPPORTED' });
      expect(await p.prisma.route.count({ where: { domain } })).toBe(0);
      expect(await p.prisma.domain.count({ where: { name: domain } })).toBe(0);
    });

    it.each([
      ['uppercase', 'Shop.example.org'],
      ['a space', 'shop example.org'],
      ['a double quote', 'shop".example.org'],
      ['a single quote', "shop'.example.org"],
      ['braces', 'shop.{example}.org'],
      ['a slash', 'shop.example.org/admin'],
      ['a backslash', 'shop\\.example.org'],
      ['unicode', 'shöp.example.org'],
      ['a control character', 'shop\u0001.example.org'],
      ['a newline', 'shop.example.org\n'],
      ['an empty label', 'shop..example.org'],
      ['a leading hyphen', '-shop.example.org'],
      ['a trailing hyphen', 'shop-.example.org'],
      ['a trailing dot', 'shop.example.org.'],
      ['a wildcard', '*.example.org'],
      ['a port', 'shop.example.org:8443'],
      ['a single label', 'shop'],
      ['an IPv4 address', '10.0.0.1'],
      ['nothing', ''],
      ['254 characters', `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(62)}`],
      ['a 64-character label', `${'a'.repeat(64)}.example.org`],
    ])('refuses a domain with %s: 400 INVALID_DOMAIN', async (_what, domain) => {
      expect(await code(attach({ domain, serviceId: service.id }))).toMatchObject({ status: 400, code: 'INVALID_DOMAIN' });
    });

    it('refuses a domain with a NUL by the guard on stored text: 400 VALIDATION_FAILED naming body/domain', async () => {
      const answer = await attach({ domain: 'shop\u0000.example.org', serviceId: service.id });
      expect(answer.status).toBe(400);
      expect(answer.body.error).toMatchObject({ code: 'VALIDATION_FAILED', details: { field: 'body/domain' } });
    });

    it('refuses an absurdly long domain before parsing it further (400 VALIDATION_FAILED)', async () => {
      expect(await code(attach({ domain: 'a'.repeat(5000), serviceId: service.id }))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
    });

    it.each([
      ['no leading slash', 'api'],
      ['a space', '/a b'],
      ['a quote', '/a"b'],
      ['braces', '/{x}'],
      ['a wildcard', '/api/*'],
      ['percent-encoding', '/a%20b'],
      ['a double slash', '//api'],
      ['a dot-dot segment', '/a/../b'],
      ['a query', '/a?b'],
      ['unicode', '/ä'],
      ['a control character', '/a\u0001'],
      ['257 characters', `/${'a'.repeat(256)}`],
      ['a number', 5],
    ])('refuses a pathPrefix with %s: 400 VALIDATION_FAILED', async (_what, pathPrefix) => {
      expect(await code(attach({ domain: 'prefix.example.com', serviceId: service.id, pathPrefix }))).toMatchObject({
        status: 400,
        code: 'VALIDATION_FAILED',
      });
    });

    it.each([
      ['no domain', { serviceId: 'x' }],
      ['no serviceId', { domain: 'a.example.com' }],
      ['a malformed serviceId', { domain: 'a.example.com', serviceId: 'a b' }],
      ['an unknown field', { domain: 'a.example.com', serviceId: 'x', port: 80 }],
    ])('refuses %s: 400 VALIDATION_FAILED', async (_what, body) => {
      expect(await code(attach(body))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
    });

    it('an unknown service is 404; no token is 401', async () => {
      expect(await code(attach({ domain: 'nobody.example.com', serviceId: 'nope' }))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
      expect(await code(attach({ domain: 'nobody.example.com', serviceId: service.id }, null))).toMatchObject({ status: 401 });
    });
  });

  describe('list, read, detach', () => {
    it('GET /v1/routes lists the team\'s routes (filter by ?serviceId=), GET /v1/routes/:id reads one', async () => {
      const list = await p.call('GET', '/v1/routes', { token: team.token });
      expect(list.status).toBe(200);
      expect(list.body.map((r: { domain: string }) => r.domain)).toEqual(['api.example.com', 'race.example.com', 'shop.example.com']);
      const filtered = await p.call('GET', `/v1/routes?serviceId=${service.id}`, { token: team.token });
      expect(filtered.body).toEqual(list.body);
      expect((await p.call('GET', '/v1/routes?serviceId=nope', { token: team.token })).body).toEqual([]);
      expect(await code(p.call('GET', '/v1/routes?limit=1', { token: team.token }))).toMatchObject({ status: 400 });
      const one = await p.call('GET', `/v1/routes/${list.body[0].id}`, { token: team.token });
      expect(one.body).toEqual(list.body[0]);
      expect(await code(p.call('GET', '/v1/routes/nope', { token: team.token }))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
      expect(await code(p.call('GET', '/v1/routes', { token: null }))).toMatchObject({ status: 401 });
    });

    it('DELETE /v1/routes/:id detaches (204) and emits routing.changed; the domain is free again', async () => {
      const route = (await p.call('GET', '/v1/routes', { token: team.token })).body.find((r: { domain: string }) => r.domain === 'api.example.com');
      p.emitted.length = 0;
      const res = await p.call('DELETE', `/v1/routes/${route.id}`, { token: team.token });
      expect(res.status).toBe(204);
      expect(p.emitted).toEqual([{ name: 'routing.changed', payload: { nodeIds: [service.nodeId], reason: 'detached api.example.com/v1' } }]);
      expect(await code(p.call('DELETE', `/v1/routes/${route.id}`, { token: team.token }))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
      expect(await code(p.call('DELETE', `/v1/routes/${route.id}`, { token: null }))).toMatchObject({ status: 401 });
      expect((await attach({ domain: 'api.example.com', serviceId: service.id })).status).toBe(201);
    });
  });
});
