import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureAdminToken, ENV_ADMIN_TOKEN_NAME } from '../../src/domain/admin-token.js';
import { generateToken, hashToken } from '../../src/domain/tokens.js';
import { errorOf, sharedPostgres, startRestPanel, type RestPanel } from '../helpers/rest-harness.js';

describe('authentication and tokens', () => {
  let p: RestPanel;

  beforeAll(async () => {
    p = await startRestPanel({ pg: await sharedPostgres() });
  });

  afterAll(async () => {
    await p?.close();
  });

  describe('tokens', () => {
    it('carry a prefix naming their kind and 32 random bytes; only sha256 hex is stored', () => {
      expect(generateToken('operator')).toMatch(/^tth_op_[A-Za-z0-9_-]{43}$/);
      expect(generateToken('customer')).toMatch(/^tth_cu_[A-Za-z0-9_-]{43}$/);
      expect(generateToken('node')).toMatch(/^tth_node_[A-Za-z0-9_-]{43}$/);
      expect(generateToken('customer')).not.toBe(generateToken('customer'));
      expect(hashToken('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
    });

    it('never appear in the database, only their hash', async () => {
      const team = await p.team('hash-check');
      const rows = await p.prisma.apiToken.findMany({ where: { teamId: team.id } });
      expect(rows).toHaveLength(1);
      expect(rows[0]!.tokenHash).toBe(hashToken(team.token));
      expect(JSON.stringify(rows)).not.toContain(team.token);
    });
  });

  describe('bearer authentication', () => {
    it('no token: 401 UNAUTHORIZED with WWW-Authenticate, before the body is even validated', async () => {
      const res = await p.call('POST', '/v1/teams', { token: null, body: { nonsense: true } });
      expect(errorOf(res)).toMatchObject({ status: 401, code: 'UNAUTHORIZED' });
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
    });

    it.each([
      ['a Basic header', 'Basic dXNlcjpwYXNz'],
      ['Bearer without a token', 'Bearer '],
      ['an unknown token', `Bearer ${generateToken('operator')}`],
      ['a token with a space inside', 'Bearer abc def'],
      ['an oversized token', `Bearer ${'x'.repeat(600)}`],
    ])('%s: 401 UNAUTHORIZED', async (_what, header) => {
      const res = await p.call('GET', '/v1/services', { token: null, headers: { authorization: header } });
      expect(errorOf(res)).toMatchObject({ status: 401, code: 'UNAUTHORIZED' });
    });

    it('accepts the scheme in any case', async () => {
      const res = await p.call('GET', '/v1/teams', { token: null, headers: { authorization: `bearer ${p.operator}` } });
      expect(res.status).toBe(200);
    });

    it('a node (agent) token is not an API token: 401', async () => {
      const node = await p.node('auth-node');
      const res = await p.call('GET', '/v1/services', { token: node.token });
      expect(errorOf(res)).toMatchObject({ status: 401, code: 'UNAUTHORIZED' });
    });

    it('a customer on an operator endpoint: 403 FORBIDDEN (even for ids that do not exist)', async () => {
      const team = await p.team('forbidden-check');
      for (const [method, path, body] of [
        ['GET', '/v1/teams', undefined],
        ['POST', '/v1/teams', { name: 'x' }],
        ['POST', `/v1/teams/${team.id}/tokens`, { name: 'x' }],
        ['GET', `/v1/teams/${team.id}/tokens`, undefined],
        ['DELETE', '/v1/tokens/nope', undefined],
        ['POST', '/v1/nodes', { name: 'x' }],
        ['GET', '/v1/nodes', undefined],
        ['GET', '/v1/nodes/nope', undefined],
        ['DELETE', '/v1/nodes/nope', undefined],
      ] as const) {
        const res = await p.call(method, path, { token: team.token, body });
        expect(errorOf(res), `${method} ${path}`).toMatchObject({ status: 403, code: 'FORBIDDEN' });
      }
    });

    it('a revoked token stops working at once', async () => {
      const team = await p.team('revoke-check');
      expect((await p.call('GET', '/v1/services', { token: team.token })).status).toBe(200);
      const [row] = await p.prisma.apiToken.findMany({ where: { teamId: team.id } });
      expect((await p.call('DELETE', `/v1/tokens/${row!.id}`)).status).toBe(200);
      const res = await p.call('GET', '/v1/services', { token: team.token });
      expect(errorOf(res)).toMatchObject({ status: 401, code: 'UNAUTHORIZED' });
    });

    it('records last use in batches: requests do not write; the periodic flush and the flush on close do', async () => {
      const team = await p.team('last-used');
      const [row] = await p.prisma.apiToken.findMany({ where: { teamId: team.id } });
      for (let i = 0; i < 5; i++) expect((await p.call('GET', '/v1/services', { token: team.token })).status).toBe(200);
      // The default flush interval (10 s) has not passed: nothing written yet.
      expect((await p.prisma.apiToken.findUniqueOrThrow({ where: { id: row!.id } })).lastUsedAt).toBeNull();

      const fast = await startRestPanel({ pg: p.pg, env: { TETHER_TOKEN_LAST_USED_FLUSH_MS: '100' } });
      try {
        const t = await fast.team('flushed');
        const before = Date.now();
        expect((await fast.call('GET', '/v1/services', { token: t.token })).status).toBe(200);
        const used = await waitForLastUse(fast, t.id);
        expect(used.getTime()).toBeGreaterThanOrEqual(before - 1000);
      } finally {
        await fast.close();
      }

      const slow = await startRestPanel({ pg: p.pg });
      try {
        const t = await slow.team('on-close');
        expect((await slow.call('GET', '/v1/services', { token: t.token })).status).toBe(200);
        await slow.app.close();
        expect(await waitForLastUse(slow, t.id, 0)).toBeInstanceOf(Date);
      } finally {
        await slow.close();
      }
    });
  });

  async function waitForLastUse(panel: RestPanel, teamId: string, timeoutMs = 5000): Promise<Date> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const [row] = await panel.prisma.apiToken.findMany({ where: { teamId } });
      if (row?.lastUsedAt) return row.lastUsedAt;
      if (Date.now() > deadline) throw new Error('lastUsedAt never written');
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  describe('first operator token', () => {
    it('is generated once when none is usable, and not again', async () => {
      // The harness already made one operator token: nothing to generate.
      expect(await ensureAdminToken(p.prisma, undefined)).toEqual({ kind: 'existing' });
      await p.prisma.apiToken.updateMany({ where: { role: 'operator' }, data: { revokedAt: new Date() } });
      try {
        const first = await ensureAdminToken(p.prisma, undefined);
        expect(first.kind).toBe('generated');
        const token = first.kind === 'generated' ? first.token : '';
        expect(token).toMatch(/^tth_op_/);
        expect((await p.call('GET', '/v1/teams', { token })).status).toBe(200);
        expect(await ensureAdminToken(p.prisma, undefined)).toEqual({ kind: 'existing' });
        // Two panels starting together: one generates at most.
        await p.prisma.apiToken.updateMany({ where: { role: 'operator' }, data: { revokedAt: new Date() } });
        const both = await Promise.all([ensureAdminToken(p.prisma, undefined), ensureAdminToken(p.prisma, undefined)]);
        expect(both.map((r) => r.kind).sort()).toEqual(['existing', 'generated']);
      } finally {
        await p.prisma.apiToken.updateMany({ where: { tokenHash: hashToken(p.operator) }, data: { revokedAt: null } });
      }
    });

    it('TETHER_ADMIN_TOKEN is made valid (hash only); changing it replaces the old one', async () => {
      const first = 'my-own-admin-token-0001';
      expect(await ensureAdminToken(p.prisma, first)).toEqual({ kind: 'configured' });
      expect(await ensureAdminToken(p.prisma, first)).toEqual({ kind: 'configured' });
      const rows = await p.prisma.apiToken.findMany({ where: { name: ENV_ADMIN_TOKEN_NAME } });
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ role: 'operator', teamId: null, tokenHash: hashToken(first) });
      expect((await p.call('GET', '/v1/teams', { token: first })).status).toBe(200);

      const second = 'my-own-admin-token-0002';
      await ensureAdminToken(p.prisma, second);
      expect((await p.call('GET', '/v1/teams', { token: second })).status).toBe(200);
      expect((await p.call('GET', '/v1/teams', { token: first })).status).toBe(401);
    });
  });
});
