import type { FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { createLoop } from '@tether/common';
import type { Db } from '../db/database.js';
import { AppError } from '../errors.js';
import type { AuthContext } from '../domain/access.js';
import { hashToken } from '../domain/tokens.js';

// Bearer-token authentication for the REST API. Routes opt in with
// `onRequest: requireAuth` or `onRequest: requireOperator`; running in
// onRequest means an unauthenticated caller is refused before its body is
// read or validated. Every request looks its token up (one indexed query), so
// a revoked token stops working at once. last_used_at is kept in memory and
// written in batches: a busy token must not turn every GET into a write.

interface Authenticator {
  authenticate(request: FastifyRequest, reply: FastifyReply): Promise<AuthContext>;
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
}

const BEARER = /^Bearer +([\x21-\x7e]{1,512})$/i;

function unauthorized(reply: FastifyReply, message?: string): AppError {
  void reply.header('www-authenticate', 'Bearer');
  return new AppError('UNAUTHORIZED', message);
}

export const authPlugin = fp<AuthOptions>(
  async (app, opts) => {
    let lastUsed = new Map<string, Date>();
    const flush = async () => {
      if (lastUsed.size === 0) return;
      const batch = lastUsed;
      lastUsed = new Map();
      await opts.prisma.$transaction(
        [...batch].map(([id, at]) => opts.prisma.apiToken.updateMany({ where: { id }, data: { lastUsedAt: at } })),
      );
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
        const token = await opts.prisma.apiToken.findUnique({
          where: { tokenHash: hashToken(match[1]!) },
          select: { id: true, role: true, teamId: true, revokedAt: true },
        });
        if (!token || token.revokedAt) throw unauthorized(reply, 'the token is unknown or revoked');
        lastUsed.set(token.id, new Date());
        return { tokenId: token.id, role: token.role, teamId: token.teamId };
      },
    } satisfies Authenticator);

    app.addHook('onReady', async () => flushLoop.start());
    app.addHook('onClose', async () => {
      await flushLoop.stop();
      await flush().catch((err: unknown) => app.log.warn({ err }, 'could not record token use'));
    });
  },
  { name: 'tether-auth' },
);

/** onRequest hook: any valid operator or customer token. */
export async function requireAuth(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  request.auth = await request.server.authenticator.authenticate(request, reply);
}

/** onRequest hook: an operator token; customers get 403. */
export async function requireOperator(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  await requireAuth(request, reply);
  if (request.auth?.role !== 'operator') throw new AppError('FORBIDDEN', 'this endpoint is for operators');
}

/** The caller of an authenticated route (throws if the route forgot its hook). */
export function authOf(request: FastifyRequest): AuthContext {
  if (!request.auth) throw new AppError('UNAUTHORIZED');
  return request.auth;
}

