import type { FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { createLoop } from '@tether/common';
import { healthOf, type Db } from '../db/database.js';
import { isDatabaseUnavailable } from '../db/db-faults.js';
import type { SessionFactOutbox } from '../session-writes/outbox.js';
import { AppError } from '../errors.js';
import type { Slots } from '../lifecycle.js';
import type { AuthContext } from '../domain/access.js';
import { hashToken } from '../domain/tokens.js';

// Bearer-token authentication for the REST API. panel-routes.ts adds `requireAuth` once,
// as the onRequest hook of the context every /v1 resource is registered in;
// an operator-only route adds `onRequest: requireOperator`, which runs after it
// and checks the role. Running in onRequest means an unauthenticated caller is
// refused before its body is read or validated. Every request looks its token up (one indexed query), so
// a revoked token stops working at once. Only when the database cannot answer
// is a token honoured from memory, and only if the database verified it within
// TETHER_TOKEN_CACHE_MS: reads that need no database (sessions, status) keep
// working through an outage, without waiting on it once it is known down. last_used_at is kept in memory and handed to the
// session-fact outbox in batches: a busy token must not turn every GET into a write.

interface Authenticator {
  authenticate(request: FastifyRequest, reply: FastifyReply): Promise<AuthContext>;
  /** A revoked token is no longer honoured from memory during an outage. */
  forget(tokenId: string): void;
  /** Did the database call this token valid lately (rate limits count such a token's requests by token)? */
  knows(tokenHash: string): boolean;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by requireAuth / requireOperator; null on routes that do not authenticate. */
    auth: AuthContext | null;
  }
  interface FastifyInstance {
    authenticator: Authenticator;
  }
}

export interface AuthOptions {
  prisma: Db;
  /** How often last_used_at is written for the tokens used since the last write. */
  lastUsedFlushMs: number;
  /** How long a verified token is honoured from memory while the database cannot answer (0: never). */
  cacheMs: number;
  /** Where last-used times go (coalesced, retried, droppable). */
  outbox: SessionFactOutbox;
  /** The last-used flush's slot in the panel's lifecycle (lifecycle.ts). */
  lifecycle: Slots;
}

/** Verified tokens remembered for outages, at most this many (the oldest verification goes first). */
const MAX_CACHED_TOKENS = 10_000;

const BEARER = /^Bearer +([\x21-\x7e]{1,512})$/i;

function unauthorized(reply: FastifyReply, message?: string): AppError {
  void reply.header('www-authenticate', 'Bearer');
  return new AppError('UNAUTHORIZED', message);
}

export const authPlugin = fp<AuthOptions>(
  async (app, opts) => {
    let lastUsed = new Map<string, Date>();
    const flush = async () => {
      for (const [id, at] of lastUsed) opts.outbox.noteTokenUsed(id, at);
      lastUsed = new Map();
    };
    /** Hashes of tokens the database called valid lately (oldest first; bounded), whatever TETHER_TOKEN_CACHE_MS. */
    const known = new Map<string, string>();
    /** Token hash → what the database said about it, and when. */
    const verified = new Map<string, { auth: AuthContext; at: number; expiresAt: number | null }>();
    const health = healthOf(opts.prisma);
    /** The cached answer: a context, null (expired: refused), undefined (not cached or too old). */
    const fromCache = (tokenHash: string): AuthContext | null | undefined => {
      const cached = verified.get(tokenHash);
      // An expired token is refused from the cache too (a database outage does not extend it).
      if (cached && cached.expiresAt !== null && cached.expiresAt <= Date.now()) return null;
      return cached && Date.now() - cached.at <= opts.cacheMs ? cached.auth : undefined;
    };
    /** One background check at a time while the database is known down (it marks the database up when it answers). */
    let probing = false;
    const probe = (tokenHash: string) => {
      if (probing) return;
      probing = true;
      verify(tokenHash)
        .catch(() => undefined)
        .finally(() => (probing = false));
    };
    const lookup = async (tokenHash: string): Promise<AuthContext | null> => {
      // Known down (a fault, no answer since): a remembered token answers at once, however long the outage has
      // lasted, so memory reads (GET /v1/sessions, status) never wait out the deadline; the database is asked
      // again in the background, once per window, and its answer (a revocation too) replaces the remembered one.
      const remembered = health.knownDown ? fromCache(tokenHash) : undefined;
      if (remembered !== undefined) {
        if (health.probeDue) probe(tokenHash);
        return remembered;
      }
      return verify(tokenHash);
    };
    const verify = async (tokenHash: string): Promise<AuthContext | null> => {
      let token;
      try {
        token = await opts.prisma.apiToken.findUnique({ where: { tokenHash }, select: { id: true, name: true, role: true, teamId: true, revokedAt: true, expiresAt: true } });
      } catch (err) {
        const cached = isDatabaseUnavailable(err) ? fromCache(tokenHash) : undefined;
        if (cached !== undefined) return cached;
        throw err;
      }
      verified.delete(tokenHash);
      known.delete(tokenHash);
      if (!token || token.revokedAt || (token.expiresAt && token.expiresAt.getTime() <= Date.now())) return null;
      const auth: AuthContext = { tokenId: token.id, name: token.name, role: token.role, teamId: token.teamId };
      known.set(tokenHash, token.id);
      if (known.size > MAX_CACHED_TOKENS) known.delete(known.keys().next().value!);
      if (opts.cacheMs > 0) {
        verified.set(tokenHash, { auth, at: Date.now(), expiresAt: token.expiresAt?.getTime() ?? null });
        if (verified.size > MAX_CACHED_TOKENS) verified.delete(verified.keys().next().value!);
      }
      return auth;
    };
    const flushLoop = createLoop({
      name: 'token-last-used-flush',
      intervalMs: opts.lastUsedFlushMs,
      run: flush,
      onError: (err) => app.log.warn({ err }, 'could not record token use'),
    });

    app.decorateRequest('auth', null);
    app.decorate('authenticator', {
      async authenticate(request, reply) {
        const header = request.headers.authorization;
        if (!header) throw unauthorized(reply, 'send Authorization: Bearer <token>');
        const match = BEARER.exec(header.trim());
        if (!match) throw unauthorized(reply, 'the Authorization header must be "Bearer <token>"');
        const auth = await lookup(hashToken(match[1]!));
        if (!auth) throw unauthorized(reply, 'the token is unknown or revoked');
        lastUsed.set(auth.tokenId, new Date());
        return auth;
      },
      forget(tokenId) {
        for (const [hash, entry] of verified) if (entry.auth.tokenId === tokenId) verified.delete(hash);
        for (const [hash, id] of known) if (id === tokenId) known.delete(hash);
      },
      knows: (tokenHash) => known.has(tokenHash),
    } satisfies Authenticator);

    // Stopped before the outbox (app.ts's order): the last batch still reaches it.
    opts.lifecycle.provide('token-last-used', {
      start: () => flushLoop.start(),
      stop: async () => {
        await flushLoop.stop();
        await flush();
      },
    });
  },
  { name: 'tether-auth' },
);

/** onRequest hook of the /v1 context (panel-routes.ts): any valid operator or customer token. */
export async function requireAuth(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  request.auth = await request.server.authenticator.authenticate(request, reply);
}

/** Route onRequest hook, after the context's requireAuth: an operator token; customers get 403. */
export async function requireOperator(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  // Outside the /v1 context nothing authenticated the caller yet: never let that mean "no check".
  if (!request.auth) await requireAuth(request, reply);
  if (request.auth?.role !== 'operator') throw new AppError('FORBIDDEN', 'this endpoint is for operators');
}

/** The caller of an authenticated route (throws if the route forgot its hook). */
export function authOf(request: FastifyRequest): AuthContext {
  if (!request.auth) throw new AppError('UNAUTHORIZED');
  return request.auth;
}

