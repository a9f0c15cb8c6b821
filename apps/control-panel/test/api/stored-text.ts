import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isUnstorableText } from '../../src/db/db-faults.js';
import { installErrorHandler } from '../../src/http/error-handler.js';
import { generateKey } from '../../src/secrets/keyring.js';
import { code, sharedPostgres, startRestPanel, type RestPanel } from '../helpers/rest-harness.js';

// Text PostgreSQL cannot store (a NUL byte) in any string the API takes, found
// from outside as 500 INTERNAL (issue 32). The walk below takes every
// operation of the served /openapi.json and sends a NUL in each path
// parameter, each query parameter and each string field of the body: every
// one must be refused 400 VALIDATION_FAILED naming that field, by the one
// guard where schemas apply (http/request-guards.ts). Without the guard the
// answers lose `details.field` (or turn 500), so the walk fails.

const NUL = 'a\u0000b';
const run = promisify(execFile);

type Schema = {
  type?: string | string[];
  properties?: Record<string, Schema>;
  additionalProperties?: boolean | Schema;
  patternProperties?: Record<string, Schema>;
  items?: Schema;
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
};
type Parameter = { in: string; name: string };
type Operation = { parameters?: Parameter[]; requestBody?: { content: Record<string, { schema: Schema }> } };

/** Each string a body may hold, as [JSON pointer under `body`, a body with NUL there and nothing else]. */
export function nulBodies(schema: Schema, path = 'body', wrap: (v: unknown) => unknown = (v) => v, depth = 0): Array<[string, unknown]> {
  if (depth > 6) return [];
  const types = [schema.type ?? []].flat();
  const out: Array<[string, unknown]> = [];
  if (types.includes('string')) out.push([path, wrap(NUL)]);
  for (const branch of [...(schema.anyOf ?? []), ...(schema.oneOf ?? []), ...(schema.allOf ?? [])]) out.push(...nulBodies(branch, path, wrap, depth + 1));
  for (const [name, inner] of Object.entries(schema.properties ?? {})) {
    out.push(...nulBodies(inner, `${path}/${name}`, (v) => wrap({ [name]: v }), depth + 1));
  }
  const records = [...Object.values(schema.patternProperties ?? {}), ...(typeof schema.additionalProperties === 'object' ? [schema.additionalProperties] : [])];
  for (const inner of records) out.push(...nulBodies(inner, `${path}/K`, (v) => wrap({ K: v }), depth + 1));
  if (schema.items) out.push(...nulBodies(schema.items, `${path}/0`, (v) => wrap([v]), depth + 1));
  return out;
}

describe('text the database cannot store (issue 32)', () => {
  let p: RestPanel;
  let team: { id: string; token: string };
  let ids: Record<string, string>;

  beforeAll(async () => {
    p = await startRestPanel({ pg: await sharedPostgres(), env: { TETHER_SECRETS_KEY: generateKey() } });
    team = await p.team('nul');
    const node = await p.node('nul-node');
    const service = (await p.call('POST', '/v1/services', { token: team.token, body: { name: 'nul', image: 'nginx', internalPort: 80, node: node.name } })).body;
    const registry = (await p.call('POST', '/v1/registries', { token: team.token, body: { host: 'registry.example.com', username: 'ci', password: 'pw' } })).body;
    expect(registry.id).toBeTypeOf('string');
    ids = { service: service.id, registry: registry.id, node: node.id };
  });
  afterAll(async () => {
    await p?.close();
  });

  it('POST and PUT /v1/registries with a NUL in username: 400 naming body/username, nothing stored', async () => {
    const body = { host: 'nul.example.com', username: NUL, password: 'pw' };
    const created = await p.call('POST', '/v1/registries', { token: team.token, body });
    expect(created.status).toBe(400);
    expect(created.body.error).toMatchObject({ code: 'VALIDATION_FAILED', details: { field: 'body/username' } });
    const replaced = await p.call('PUT', `/v1/registries/${ids.registry}`, { token: team.token, body });
    expect(replaced.body.error).toMatchObject({ code: 'VALIDATION_FAILED', details: { field: 'body/username' } });
    expect((await p.call('GET', '/v1/registries', { token: team.token })).body).toMatchObject([{ id: ids.registry, username: 'ci', host: 'registry.example.com' }]);
    expect(await p.prisma.registry.count({ where: { host: 'nul.example.com' } })).toBe(0);
  });

  it('rollback `to` with a NUL: 400 naming body/to; `to` that is no id: 400', async () => {
    const nul = await p.call('POST', `/v1/services/${ids.service}/rollback`, { token: team.token, body: { to: NUL } });
    expect(nul.body.error).toMatchObject({ code: 'VALIDATION_FAILED', details: { field: 'body/to' } });
    expect(await code(p.call('POST', `/v1/services/${ids.service}/rollback`, { token: team.token, body: { to: '../x' } }))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
  });

  it('rollback with no body, {}, or an empty JSON body is taken (409 NO_ROLLBACK_TARGET: nothing ran), never "body must be object"', async () => {
    const url = `/v1/services/${ids.service}/rollback`;
    const none = await p.call('POST', url, { token: team.token });
    expect(none.body.error).toMatchObject({ code: 'NO_ROLLBACK_TARGET' });
    expect((await p.call('POST', url, { token: team.token, body: {} })).body.error).toMatchObject({ code: 'NO_ROLLBACK_TARGET' });
    const empty = await p.call('POST', url, { token: team.token, body: '', headers: { 'content-type': 'application/json' } });
    expect(empty.body.error).toMatchObject({ code: 'NO_ROLLBACK_TARGET' });
    // Exactly what the reporter typed.
    const base = `http://127.0.0.1:${(p.app.server.address() as { port: number }).port}`;
    const { stdout } = await run('curl', ['-s', '-X', 'POST', '-H', `Authorization: Bearer ${team.token}`, base + url]);
    expect(JSON.parse(stdout).error).toMatchObject({ code: 'NO_ROLLBACK_TARGET' });
    // A body that is required stays required.
    expect(await code(p.call('POST', '/v1/routes', { token: team.token, body: '', headers: { 'content-type': 'application/json' } }))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
  });

  it('GET /v1/audit?targetId= takes an id or <id>/<NAME> and refuses anything else', async () => {
    for (const bad of ["' OR '1'='1", '../', '%00', 'a/b/c', 'x'.repeat(65)]) {
      const answer = await p.call('GET', `/v1/audit?targetId=${encodeURIComponent(bad === '%00' ? '\u0000' : bad)}`);
      expect(answer.status, bad).toBe(400);
      expect(answer.body.error.code, bad).toBe('VALIDATION_FAILED');
    }
    expect((await p.call('GET', '/v1/audit?targetId=%00')).body.error).toMatchObject({ details: { field: 'querystring/targetId' } });
    // What `tether audit --target secret/<service>/<NAME>` sends, and a plain id.
    expect((await p.call('PATCH', `/v1/services/${ids.service}`, { token: team.token, body: { secrets: { API_KEY: 'hush' } } })).status).toBe(200);
    const secret = await p.call('GET', `/v1/audit?targetType=secret&targetId=${ids.service}/API_KEY`);
    expect(secret.status).toBe(200);
    expect(secret.body.items.map((i: { action: string }) => i.action)).toEqual(['secret.set']);
    expect((await p.call('GET', `/v1/audit?targetId=${ids.service}`)).status).toBe(200);
  });

  it('a 22021 or 22P05 that still reaches the error handler is 400, never 500', async () => {
    const refused: unknown[] = [];
    for (const statement of [p.prisma.$queryRaw`SELECT ${NUL}::text`, p.prisma.$queryRaw`SELECT ${JSON.stringify({ v: NUL })}::jsonb`]) {
      refused.push(await statement.then(() => null, (err: unknown) => err));
    }
    const app = Fastify();
    installErrorHandler(app);
    refused.forEach((err, i) => {
      expect(isUnstorableText(err), String(err)).toBe(true);
      app.get(`/fail/${i}`, async () => {
        throw err;
      });
    });
    for (const i of [0, 1]) {
      const res = await app.inject({ method: 'GET', url: `/fail/${i}` });
      expect(res.statusCode).toBe(400);
      expect(res.json().error.code).toBe('VALIDATION_FAILED');
    }
    await app.close();
  });

  it('routes outside /openapi.json have the same guard: the fleet page sign-in with a NUL token', async () => {
    const base = `http://127.0.0.1:${(p.app.server.address() as { port: number }).port}`;
    const answer = await p.call('POST', '/dashboard/api/sign-in', { token: null, body: { token: NUL }, headers: { origin: base } });
    expect(answer.body.error).toMatchObject({ code: 'VALIDATION_FAILED', details: { field: 'body/token' } });
  });

  // None is skipped: the guard runs before any handler, so a NUL id reaches no stream, log or delete.
  // (The agents' upgrade, GET /v1/agent/connect, is not in the document: its frames are the protocol's.)
  it('every operation of /openapi.json refuses a NUL in each path parameter, query parameter and body string, naming it', async () => {
    const doc = (await p.call('GET', '/openapi.json')).body as { paths: Record<string, Record<string, Operation & { requestBody?: { required?: boolean } }>> };
    // The document says which body may be left out: rollback's, and lost's (left out: 400 CONFIRMATION_REQUIRED), no other.
    const optional = Object.entries(doc.paths).flatMap(([route, ops]) => Object.entries(ops).filter(([, op]) => op.requestBody?.required === false).map(([m]) => `${m} ${route}`));
    expect(optional.sort()).toEqual(['post /v1/nodes/{id}/lost', 'post /v1/services/{id}/rollback']);
    let sent = 0;
    for (const [route, operations] of Object.entries(doc.paths)) {
      for (const [method, op] of Object.entries(operations)) {
        const key = `${method.toUpperCase()} ${route.replace(/\{(\w+)\}/g, ':$1')}`;
        const params = (op.parameters ?? []).filter((q) => q.in === 'path');
        const fill = (nul?: string) => route.replace(/\{(\w+)\}/g, (_, name: string) => (name === nul ? encodeURIComponent(NUL) : ids.service!));
        const cases: Array<{ path: string; body?: unknown; field: string }> = [];
        for (const param of params) cases.push({ path: fill(param.name), field: `params/${param.name}` });
        for (const q of (op.parameters ?? []).filter((x) => x.in === 'query')) cases.push({ path: `${fill()}?${q.name}=${encodeURIComponent(NUL)}`, field: `querystring/${q.name}` });
        const schema = op.requestBody?.content['application/json']?.schema;
        for (const [field, body] of schema ? nulBodies(schema) : []) cases.push({ path: fill(), body, field });
        for (const c of cases) {
          const answer = await p.call(method.toUpperCase(), c.path, { ...(c.body !== undefined ? { body: c.body } : {}) });
          sent += 1;
          expect({ key, field: c.field, status: answer.status, error: answer.body?.error }).toMatchObject({
            status: 400,
            error: { code: 'VALIDATION_FAILED', details: { field: c.field } },
          });
        }
      }
    }
    // The walk covered the API, not a corner of it.
    expect(sent).toBeGreaterThan(60);
    // Nothing of it was stored: no registry, route, service or team with a NUL anywhere.
    const stored = await p.prisma.$queryRaw<Array<{ n: bigint }>>`SELECT count(*) AS n FROM services WHERE name <> 'nul'`;
    expect(Number(stored[0]!.n)).toBe(0);
  });
});
