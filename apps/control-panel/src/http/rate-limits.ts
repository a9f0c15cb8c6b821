import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { hashToken } from '../domain/tokens.js';

// Request rates, with @fastify/rate-limit, counted in onRequest before any
// token is looked up. A request whose bearer token this panel verified
// recently counts toward that token (TETHER_RATE_LIMIT_PER_TOKEN); every other
// request (no token, an unknown or wrong one, the fleet page's cookie) toward
// its source address (TETHER_RATE_LIMIT_UNAUTHENTICATED), so a flood of made-up
// tokens costs one bucket, not one query each. The fleet-page sign-in has its
// own, smaller bucket per address (TETHER_SIGN_IN_RATE_LIMIT). Past a limit:
// 429 RATE_LIMITED with Retry-After. Counts are per panel (the library's
// memory store): they protect this panel's event loop and pool, and a shared
// count would put a database write in every request's path.

export interface RateLimits {
  windowMs: number;
  perToken: number;
  unauthenticated: number;
  signIn: number;
}

/** Not limited here: probes and metrics (the operator's), the agent upgrade (its own admission), other panels. */
const EXEMPT = /^\/(healthz|readyz|metrics)(\?|$)|^\/v1\/agent\/connect(\?|$)|^\/internal\/v1\//;

const BEARER = /^Bearer +([\x21-\x7e]{1,512})$/i;

type Hook = (request: FastifyRequest, reply: FastifyReply) => Promise<void>;

/**
 * Registers the library and the panel-wide limit as an app-level onRequest hook (so it runs before any route's
 * own token check); returns the sign-in's own limit, a route-level onRequest hook. Both use the library's
 * counters directly: its ready-made hooks let only one limit run per request.
 */
export async function installRateLimits(app: FastifyInstance, limits: RateLimits, knownToken: (tokenHash: string) => boolean): Promise<Hook> {
  const keyOf = (request: FastifyRequest): string => {
    const match = BEARER.exec(request.headers.authorization?.trim() ?? '');
    if (match) {
      const hash = hashToken(match[1]!);
      if (knownToken(hash)) return `token:${hash}`;
    }
    return `address:${request.ip}`;
  };
  await app.register(rateLimit, { global: false });
  const hookOf = (check: ReturnType<FastifyInstance['createRateLimit']>): Hook => async (request, reply) => {
    const result = await check(request);
    if (result.isAllowed || !result.isExceeded) return;
    void reply.header('retry-after', String(Math.max(1, result.ttlInSeconds)));
    throw new AppError('RATE_LIMITED', `more than ${result.max} requests in ${Math.round(limits.windowMs / 1000)} s; retry after ${result.ttlInSeconds} s`);
  };
  const panelWide = hookOf(
    app.createRateLimit({
      timeWindow: limits.windowMs,
      max: (_request, key) => (key.startsWith('token:') ? limits.perToken : limits.unauthenticated),
      keyGenerator: keyOf,
      allowList: (request) => EXEMPT.test(request.url),
    }),
  );
  app.addHook('onRequest', panelWide);
  return hookOf(app.createRateLimit({ timeWindow: limits.windowMs, max: limits.signIn, keyGenerator: (request) => `sign-in:${request.ip}` }));
}
