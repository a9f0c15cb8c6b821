import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorOf, sharedPostgres, startRestPanel, type RestPanel } from '../helpers/rest-harness.js';
import { generateKey } from '../../src/secrets/keyring.js';

// Tenant isolation as a matrix: two teams, every endpoint a customer token
// can reach, every verb, in both directions. A team can neither read nor
// change anything of the other: reads of its resources are 404 (existence is
// not leaked), lists leave them out, writes are 404 and change nothing.

interface Fixture {
  teamId: string;
  token: string;
  serviceId: string;
  routeId: string;
  deploymentId: string;
  /** A named volume of the team's service, as its node reported it. */
  volumeId: string;
  /** The team's credentials for a private registry. */
  registryId: string;
}

describe('tenant isolation', () => {
  let p: RestPanel;
  const teams: Record<'a' | 'b', Fixture> = {} as Record<'a' | 'b', Fixture>;

  let nodeId: string;

  async function fixture(name: string): Promise<Fixture> {
    const team = await p.team(name);
    const service = await p.call('POST', '/v1/services', { token: team.token, body: { name: 'web', image: 'nginx', internalPort: 80 } });
    const route = await p.call('POST', '/v1/routes', { token: team.token, body: { domain: `${name}.example.com`, serviceId: service.body.id } });
    const deployment = await p.call('POST', `/v1/services/${service.body.id}/deployments`, { token: team.token });
    expect([service.status, route.status, deployment.status]).toEqual([201, 201, 201]);
    // What a node's volumes.report leaves (sessions/volume-reports.ts): the row the volumes API lists and deletes.
    const volume = await p.prisma.nodeVolume.create({
      data: { nodeId, dockerName: `tether-${service.body.id}-data`, serviceId: service.body.id, name: 'data', teamId: team.id, serviceName: 'web', reportedAt: new Date() },
    });
    const registry = await p.call('POST', '/v1/registries', { token: team.token, body: { host: `registry.${name}.example:5000`, username: name, password: `${name}-password` } });
    expect(registry.status).toBe(201);
    return { teamId: team.id, token: team.token, serviceId: service.body.id, routeId: route.body.id, deploymentId: deployment.body.id, volumeId: volume.id, registryId: registry.body.id };
  }

  /** Everything the database holds for a team, to prove nothing changed. */
  async function snapshot(f: Fixture) {
    const services = await p.prisma.service.findMany({ where: { teamId: f.teamId }, include: { routes: true, deployments: true }, orderBy: { id: 'asc' } });
    const tokens = await p.prisma.apiToken.findMany({ where: { teamId: f.teamId }, select: { id: true, revokedAt: true } });
    const volumes = await p.prisma.nodeVolume.findMany({ where: { teamId: f.teamId }, orderBy: { id: 'asc' } });
    const registries = await p.prisma.registry.findMany({ where: { teamId: f.teamId }, orderBy: { id: 'asc' } });
    return { services, tokens, volumes, registries };
  }

  type Case = {
    method: string;
    /** Route pattern as registered (matches the OpenAPI document). */
    route: string;
    path: (victim: Fixture) => string;
    body?: (victim: Fixture) => unknown;
    /** 'not-found' for a 404, or a check of a 200 list that must not contain the victim's data. */
    expect: 'not-found' | ((body: unknown, victim: Fixture) => void);
    /** A stream that does not end on its own (SSE, log follow): the actor's own read is checked in that endpoint's suite. */
    streams?: true;
  };

  const excludes = (key: 'id' | 'teamId' | 'serviceId', which: keyof Fixture) => (body: unknown, victim: Fixture) => {
    expect(Array.isArray(body)).toBe(true);
    for (const item of body as Record<string, unknown>[]) expect(item[key]).not.toBe(victim[which]);
  };

  const cases: Case[] = [
    { method: 'GET', route: '/v1/teams/{id}', path: (v) => `/v1/teams/${v.teamId}`, expect: 'not-found' },
    { method: 'GET', route: '/v1/services', path: () => '/v1/services', expect: excludes('teamId', 'teamId') },
    { method: 'GET', route: '/v1/services', path: (v) => `/v1/services?teamId=${v.teamId}`, expect: (body) => expect(body).toEqual([]) },
    { method: 'POST', route: '/v1/services', path: () => '/v1/services', body: (v) => ({ name: 'intruder', image: 'nginx', teamId: v.teamId }), expect: 'not-found' },
    { method: 'GET', route: '/v1/services/{id}', path: (v) => `/v1/services/${v.serviceId}`, expect: 'not-found' },
    { method: 'PATCH', route: '/v1/services/{id}', path: (v) => `/v1/services/${v.serviceId}`, body: () => ({ image: 'evil:1', replicas: 0 }), expect: 'not-found' },
    { method: 'DELETE', route: '/v1/services/{id}', path: (v) => `/v1/services/${v.serviceId}`, expect: 'not-found' },
    { method: 'GET', route: '/v1/routes', path: () => '/v1/routes', expect: excludes('serviceId', 'serviceId') },
    { method: 'GET', route: '/v1/routes', path: (v) => `/v1/routes?serviceId=${v.serviceId}`, expect: (body) => expect(body).toEqual([]) },
    { method: 'POST', route: '/v1/routes', path: () => '/v1/routes', body: (v) => ({ domain: 'hijack.example.com', serviceId: v.serviceId }), expect: 'not-found' },
    { method: 'GET', route: '/v1/routes/{id}', path: (v) => `/v1/routes/${v.routeId}`, expect: 'not-found' },
    { method: 'DELETE', route: '/v1/routes/{id}', path: (v) => `/v1/routes/${v.routeId}`, expect: 'not-found' },
    { method: 'POST', route: '/v1/services/{id}/deployments', path: (v) => `/v1/services/${v.serviceId}/deployments`, expect: 'not-found' },
    { method: 'GET', route: '/v1/services/{id}/deployments', path: (v) => `/v1/services/${v.serviceId}/deployments`, expect: 'not-found' },
    { method: 'POST', route: '/v1/services/{id}/rollback', path: (v) => `/v1/services/${v.serviceId}/rollback`, body: (v) => ({ to: v.deploymentId }), expect: 'not-found' },
    { method: 'GET', route: '/v1/volumes', path: () => '/v1/volumes', expect: excludes('id', 'volumeId') },
    { method: 'GET', route: '/v1/volumes', path: (v) => `/v1/volumes?serviceId=${v.serviceId}`, expect: (body) => expect(body).toEqual([]) },
    { method: 'DELETE', route: '/v1/volumes/{id}', path: (v) => `/v1/volumes/${v.volumeId}`, expect: 'not-found' },
    { method: 'GET', route: '/v1/registries', path: () => '/v1/registries', expect: excludes('id', 'registryId') },
    { method: 'GET', route: '/v1/registries', path: (v) => `/v1/registries?teamId=${v.teamId}`, expect: (body) => expect(body).toEqual([]) },
    { method: 'POST', route: '/v1/registries', path: () => '/v1/registries', body: (v) => ({ teamId: v.teamId, host: 'ghcr.io', username: 'intruder', password: 'x' }), expect: 'not-found' },
    { method: 'GET', route: '/v1/registries/{id}', path: (v) => `/v1/registries/${v.registryId}`, expect: 'not-found' },
    { method: 'PUT', route: '/v1/registries/{id}', path: (v) => `/v1/registries/${v.registryId}`, body: () => ({ host: 'evil.example', username: 'intruder', password: 'x' }), expect: 'not-found' },
    { method: 'DELETE', route: '/v1/registries/{id}', path: (v) => `/v1/registries/${v.registryId}`, expect: 'not-found' },
    { method: 'GET', route: '/v1/deployments/{id}', path: (v) => `/v1/deployments/${v.deploymentId}`, expect: 'not-found' },
    { method: 'GET', route: '/v1/services/{id}/logs', path: (v) => `/v1/services/${v.serviceId}/logs`, expect: 'not-found', streams: true },
    { method: 'GET', route: '/v1/deployments/{id}/events', path: (v) => `/v1/deployments/${v.deploymentId}/events`, expect: 'not-found', streams: true },
    // The audit trail: another team's rows are not listed, even when asked for by team and target; what is
    // listed for the victim's service is the actor's own refused attempts (this matrix's), in the actor's team.
    { method: 'GET', route: '/v1/audit', path: () => '/v1/audit?limit=500', expect: (body, v) => expect(JSON.stringify(body)).not.toContain(v.teamId) },
    {
      method: 'GET',
      route: '/v1/audit',
      path: (v) => `/v1/audit?teamId=${v.teamId}&targetId=${v.serviceId}`,
      expect: (body, v) => {
        for (const item of (body as { items: { teamId: string; outcome: string }[] }).items) expect(item).toMatchObject({ teamId: expect.not.stringMatching(v.teamId), outcome: 'refused' });
      },
    },
    // The session layer's customer endpoints (routes/status.ts) obey the same rule.
    { method: 'GET', route: '/v1/services/{id}/status', path: (v) => `/v1/services/${v.serviceId}/status`, expect: 'not-found' },
    {
      method: 'GET',
      route: '/v1/status',
      path: () => '/v1/status',
      expect: (body, v) => {
        for (const s of (body as { services: Record<string, unknown>[] }).services) expect(JSON.stringify(s)).not.toContain(v.serviceId);
      },
    },
  ];

  beforeAll(async () => {
    // With a secrets key: registries (their passwords sealed) are among what a team holds.
    p = await startRestPanel({ pg: await sharedPostgres(), env: { TETHER_SECRETS_KEY: generateKey() } });
    nodeId = (await p.node('shared-node')).id;
    teams.a = await fixture('team-a');
    teams.b = await fixture('team-b');
  });

  afterAll(async () => {
    await p?.close();
  });

  describe.each([
    ['a', 'b'],
    ['b', 'a'],
  ] as const)('team %s against team %s', (actorKey, victimKey) => {
    it.each(cases.map((c) => [`${c.method} ${c.path({ teamId: ':team', serviceId: ':service', routeId: ':route', deploymentId: ':deployment', volumeId: ':volume', registryId: ':registry', token: '' })}`, c] as const))(
      '%s',
      async (_name, c) => {
        const actor = teams[actorKey];
        const victim = teams[victimKey];
        const before = await snapshot(victim);
        const res = await p.call(c.method, c.path(victim), { token: actor.token, body: c.body?.(victim) });
        if (c.expect === 'not-found') {
          expect(errorOf(res)).toMatchObject({ status: 404, code: 'NOT_FOUND' });
        } else {
          expect(res.status).toBe(200);
          c.expect(res.body, victim);
        }
        expect(await snapshot(victim)).toEqual(before);
        // The actor's own resources stay reachable with the same request shape.
        if (c.expect === 'not-found' && c.method === 'GET' && !c.streams) {
          expect((await p.call('GET', c.path(actor), { token: actor.token })).status).toBe(200);
        }
      },
    );
  });

  describe('the matrix covers every endpoint a customer can reach', () => {
    it('each /v1 operation in the OpenAPI document is either operator-only (403 for a customer) or in the matrix', async () => {
      const doc = (await p.call('GET', '/openapi.json')).body as { paths: Record<string, Record<string, unknown>> };
      const covered = new Set(cases.map((c) => `${c.method} ${c.route}`));
      const uncovered: string[] = [];
      for (const [route, operations] of Object.entries(doc.paths)) {
        if (!route.startsWith('/v1/')) continue;
        for (const method of Object.keys(operations).map((m) => m.toUpperCase())) {
          if (covered.has(`${method} ${route}`)) continue;
          const path = route.replace(/\{[^}]+\}/g, 'probe');
          const res = await p.call(method, path, { token: teams.a.token, body: method === 'GET' || method === 'DELETE' ? undefined : {} });
          if (res.status !== 403) uncovered.push(`${method} ${route} (customer got ${res.status})`);
        }
      }
      expect(uncovered).toEqual([]);
    });
  });
});
