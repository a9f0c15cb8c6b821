import type { NodeDetail } from '@tether/fleet-wire';
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import Type from 'typebox';
import type { Db } from '../db/database.js';
import { DatabaseUnavailableError, isDatabaseUnavailable, withDeadline } from '../db/db-faults.js';
import { fleetRow } from '../dashboard/fleet-rows.js';
import type { Fleet } from '../dashboard/fleet.js';
import type { Claim } from '../dashboard/sign-in-cookies.js';
import { sse, type StreamClient } from '../dashboard/fleet-feed.js';
import { nodeAllocations } from '../dashboard/node-allocations.js';
import { dashboardDist, loadStaticFiles } from '../dashboard/static-files.js';
import { hashToken } from '../domain/tokens.js';
import { AppError } from '../errors.js';
import { serviceStatus, STATUS_SERVICE_SELECT } from '../status/service-status.js';
import type { LeftOutLookup } from '../status/status-types.js';

// The fleet page (operators): static files, cookie sign-in and sign-out, the
// live stream and node detail, all under /dashboard. The cookie is accepted
// here only; /v1 reads bearer tokens and nothing else. Every non-GET must come
// from the page's own origin; every answer forbids framing.

export interface DashboardOptions {
  prisma: Db;
  fleet: Fleet;
  /** The panel's public URL (an allowed Origin besides the request's own host). */
  publicUrl: string | undefined;
  /** How long the page's database reads may take (TETHER_DASHBOARD_DB_DEADLINE_MS). */
  dbDeadlineMs: number;
  /** Where the built page is; the dashboard package's dist when absent. */
  distDir?: string;
  /** The sign-in's own rate limit, an onRequest hook (http/rate-limits.ts). */
  signInLimit?: (request: FastifyRequest, reply: FastifyReply) => Promise<void>;
  /** What this panel's last allocations set to a node left out (issue 36), shown on those replicas as the status API does. */
  leftOut?: LeftOutLookup;
  /** A cookie was signed out here (PanelEvents: the cluster tells the other panels). */
  onSignedOut?: (claim: Claim) => void;
}

const CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "font-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** On every fleet-page answer, its 404s too (panel-http.ts sets them for every /dashboard path). */
export const SECURITY_HEADERS: Record<string, string> = {
  'content-security-policy': CSP,
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
};

declare module 'fastify' {
  interface FastifyRequest {
    /** The signed-in operator's claim on /dashboard/api routes. */
    dashboardClaim: Claim | null;
  }
}

/**
 * Database reads of the page wait `ms`, then answer 503 DATABASE_UNAVAILABLE as the REST API does (the live
 * rows need no database). Driver text stays in the log, never in the answer.
 */
function deadline(ms: number) {
  return <T>(work: Promise<T>, what: string): Promise<T> =>
    withDeadline(work, ms, `the database (${what})`).catch((err: unknown) => {
      if (err instanceof AppError) throw err;
      if (err instanceof DatabaseUnavailableError) throw new AppError('DATABASE_UNAVAILABLE', err.message);
      if (isDatabaseUnavailable(err)) throw new AppError('DATABASE_UNAVAILABLE', `the database is unavailable (${what})`);
      throw err;
    });
}

const SignInBody = Type.Object({ token: Type.String({ minLength: 1, maxLength: 512 }) }, { additionalProperties: false });
const NodeParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });

export const dashboardRoutes: FastifyPluginAsync<DashboardOptions> = async (app, opts) => {
  const { fleet, prisma } = opts;
  const withinDeadline = deadline(opts.dbDeadlineMs);
  const files = loadStaticFiles(opts.distDir ?? dashboardDist());
  const allowedOrigins = new Set<string>();
  if (opts.publicUrl) allowedOrigins.add(new URL(opts.publicUrl).origin);

  app.decorateRequest('dashboardClaim', null);
  // Cross-site request forgery: a browser says where a request comes from; anything but this page is refused.
  app.addHook('onRequest', async (request) => {
    if (request.method === 'GET' || request.method === 'HEAD') return;
    const site = request.headers['sec-fetch-site'];
    const origin = request.headers.origin;
    const own = `${request.protocol}://${request.headers.host ?? ''}`;
    // The header's value is not repeated: no answer echoes the request.
    if (site !== undefined && site !== 'same-origin') throw new AppError('FORBIDDEN', 'cross-site request refused (Sec-Fetch-Site is not same-origin)');
    if (!origin || (origin !== own && !allowedOrigins.has(origin))) throw new AppError('FORBIDDEN', 'cross-origin request refused: the Origin must be this panel');
  });

  const claimOf = (request: FastifyRequest): Claim | null => {
    const claim = fleet.cookies.verify(fleet.cookies.read(request.headers.cookie));
    return claim && fleet.accepts(claim) ? claim : null;
  };
  const requireCookie = async (request: FastifyRequest) => {
    request.dashboardClaim = claimOf(request);
    if (!request.dashboardClaim) throw new AppError('UNAUTHORIZED', 'sign in with an operator token');
  };

  // The page: one document for every client-side path, the assets by name.
  const page = (reply: FastifyReply) => {
    const index = files.get('index.html');
    if (!index) throw new AppError('NOT_READY', 'the dashboard is not built (run the build)');
    return reply.type(index.type).send(index.body);
  };
  const hidden = { schema: { hide: true } };
  app.get('/dashboard', hidden, async (_request, reply) => page(reply));
  app.get('/dashboard/', hidden, async (_request, reply) => page(reply));
  app.get('/dashboard/nodes/:id', hidden, async (_request, reply) => page(reply));
  app.get<{ Params: { '*': string } }>('/dashboard/assets/*', hidden, async (request, reply) => {
    const file = files.get(`assets/${request.params['*']}`);
    if (!file) throw new AppError('NOT_FOUND', 'no such asset');
    if (file.immutable) void reply.header('cache-control', 'public, max-age=31536000, immutable');
    return reply.type(file.type).send(file.body);
  });

  const signInConfig = opts.signInLimit ? { onRequest: opts.signInLimit } : {};
  app.post<{ Body: { token: string } }>('/dashboard/api/sign-in', { schema: { hide: true, body: SignInBody }, ...signInConfig }, async (request, reply) => {
    const hash = hashToken(request.body.token);
    let tokenId = fleet.tokens.idOf(hash);
    if (!tokenId) {
      // Not in the cached list: a token made since the last refresh, or one that may not sign in.
      const [token, node] = await withinDeadline(
        Promise.all([
          prisma.apiToken.findUnique({ where: { tokenHash: hash }, select: { id: true, role: true, revokedAt: true } }),
          prisma.node.findUnique({ where: { tokenHash: hash }, select: { id: true } }),
        ]),
        'checking a token that is not in the cached list',
      );
      if (node) throw new AppError('FORBIDDEN', 'node tokens cannot sign in to the dashboard');
      if (!token || token.revokedAt) throw new AppError('UNAUTHORIZED', 'the token is unknown or revoked');
      if (token.role !== 'operator') throw new AppError('FORBIDDEN', 'only operator tokens can sign in to the dashboard');
      await fleet.tokens.refresh().catch(() => undefined);
      tokenId = token.id;
      if (!fleet.tokens.valid(tokenId)) throw new AppError('DATABASE_UNAVAILABLE', 'the token list could not be refreshed; try again');
    }
    request.auditActor = { tokenId, name: null, kind: 'operator' };
    const { value, claim } = fleet.cookies.sign(tokenId);
    void reply.header('set-cookie', fleet.cookies.setCookie(value));
    return { expiresAt: new Date(claim.expiresAt * 1000).toISOString() };
  });

  // Server-side too: the cookie's id is refused from now on by this panel, by the others on the signal, and by
  // any panel that reads the sign-out row. A database that cannot take the row leaves it to this panel and the signal.
  app.post('/dashboard/api/sign-out', hidden, async (request, reply) => {
    const claim = fleet.cookies.verify(fleet.cookies.read(request.headers.cookie));
    if (claim) {
      request.auditActor = { tokenId: claim.tokenId, name: null, kind: 'operator' };
      fleet.signedOut.note(claim.id, claim.expiresAt * 1000);
      opts.onSignedOut?.(claim);
      fleet.feed.recheck();
      await withinDeadline(fleet.signedOut.record(claim), 'recording the sign-out').catch((err: unknown) => {
        request.log.warn({ err }, 'sign-out not recorded in the database; it holds on this panel and those that heard the signal');
      });
    }
    void reply.header('set-cookie', fleet.cookies.clearCookie());
    return reply.code(204).send();
  });

  // 200 either way: the page asks at load whether it is signed in, and a 401 would be a console error on every visit.
  app.get('/dashboard/api/me', hidden, async (request) => {
    const claim = claimOf(request);
    return claim ? { signedIn: true, expiresAt: new Date(claim.expiresAt * 1000).toISOString() } : { signedIn: false, expiresAt: null };
  });

  app.get('/dashboard/api/stream', { ...hidden, onRequest: requireCookie }, async (request, reply) => {
    const raw = reply.raw;
    reply.hijack();
    raw.writeHead(200, {
      ...SECURITY_HEADERS,
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-store',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    raw.write('retry: 2000\n\n');
    const claim = request.dashboardClaim!;
    const client: StreamClient = {
      write: (chunk) => void raw.write(chunk),
      get buffered() {
        return raw.writableLength;
      },
      allowed: () => fleet.accepts(claim),
      end: (reason) => {
        if (reason === 'slow_client') raw.destroy();
        else raw.end(reason === 'signed_out' ? sse('signed-out', { reason: 'the sign-in expired or its token was revoked' }) : undefined);
      },
    };
    raw.on('close', () => fleet.feed.remove(client));
    fleet.feed.add(client);
  });

  app.get<{ Params: { id: string } }>(
    '/dashboard/api/nodes/:id',
    { schema: { hide: true, params: NodeParams }, onRequest: requireCookie },
    async (request) => {
      const id = request.params.id;
      let node = fleet.directory.snapshot.byId.get(id);
      if (!node) {
        await withinDeadline(fleet.directory.trigger(), 'reading nodes');
        node = fleet.directory.snapshot.byId.get(id);
      }
      if (!node) throw new AppError('NOT_FOUND', `no node ${id}`);
      const [sessions, reloads, services, allocations] = await withinDeadline(Promise.all([
        prisma.sessionEvent.findMany({ where: { nodeId: id }, orderBy: [{ at: 'desc' }, { id: 'desc' }], take: 100 }),
        prisma.reloadEvent.findMany({ where: { nodeId: id }, orderBy: [{ at: 'desc' }, { id: 'desc' }], take: 50 }),
        prisma.service.findMany({
          where: { nodeId: id },
          orderBy: { name: 'asc' },
          select: STATUS_SERVICE_SELECT,
        }),
        nodeAllocations(prisma, id, fleet.sources, opts.leftOut),
      ]), 'reading the node\'s history');
      const now = Date.now();
      return {
        now,
        row: fleetRow(node, fleet.directory.snapshot, fleet.sources),
        sessions: sessions.map((e) => ({ sessionId: e.sessionId, kind: e.kind, at: e.at.getTime(), reason: e.reason, closeCode: e.closeCode })),
        reloads: reloads.map((r) => ({ at: r.at.getTime(), hashBefore: r.hashBefore, hashAfter: r.hashAfter, reason: r.reason })),
        services: services.map((s) => serviceStatus(s, fleet.sources.registry, now, fleet.sources.cluster, opts.leftOut)),
        allocations,
      } satisfies NodeDetail;
    },
  );
};
