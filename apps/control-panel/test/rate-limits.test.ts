import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sleep } from '@tether/testkit';
import { healthOf } from '../src/db/database.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';

// Rate limits (issue 25: on the main this test was written against, wrong
// sign-ins were answered at 412–518 a second from one address, each costing
// two queries; RATE_LIMITED was documented as reserved). Both ways: exactly
// the limit is answered, the next is 429 RATE_LIMITED with Retry-After, another
// address is not affected, and the window's end serves the address again.

const WINDOW_MS = 3_000;
const SIGN_IN = 5;
const UNAUTH = 10;
const PER_TOKEN = 30;
let panel: Panel;

beforeAll(async () => {
  panel = await startPanel({
    env: {
      TETHER_RATE_LIMIT_WINDOW_MS: String(WINDOW_MS),
      TETHER_SIGN_IN_RATE_LIMIT: String(SIGN_IN),
      TETHER_RATE_LIMIT_UNAUTHENTICATED: String(UNAUTH),
      TETHER_RATE_LIMIT_PER_TOKEN: String(PER_TOKEN),
    },
  });
}, 60_000);
afterAll(async () => panel?.close());

interface Answer {
  status: number;
  retryAfter: string | undefined;
  code: string | undefined;
}

function call(from: string, method: string, path: string, headers: Record<string, string> = {}, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: panel.port, localAddress: from, method, path, headers, agent: false }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (text += c));
      res.on('end', () => {
        let code: string | undefined;
        try {
          code = (JSON.parse(text) as { error?: { code?: string } }).error?.code;
        } catch {
          code = undefined;
        }
        resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] as string | undefined, code });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

const signIn = (from: string) =>
  call(from, 'POST', '/dashboard/api/sign-in', { 'content-type': 'application/json', origin: panel.url }, JSON.stringify({ token: 'tth_op_wrong' }));

async function times(n: number, f: () => Promise<Answer>): Promise<Answer[]> {
  const out: Answer[] = [];
  for (let i = 0; i < n; i++) out.push(await f());
  return out;
}

describe('rate limits', () => {
  it(`${SIGN_IN} sign-ins per window per address, then 429 RATE_LIMITED with Retry-After; another address and the next window are served`, async () => {
    const first = await times(SIGN_IN + 3, () => signIn('127.0.0.7'));
    expect(first.slice(0, SIGN_IN).map((a) => a.status)).toEqual(Array(SIGN_IN).fill(401));
    for (const a of first.slice(SIGN_IN)) {
      expect(a).toMatchObject({ status: 429, code: 'RATE_LIMITED' });
      expect(Number(a.retryAfter)).toBeGreaterThanOrEqual(1);
      expect(Number(a.retryAfter)).toBeLessThanOrEqual(WINDOW_MS / 1000);
    }
    expect((await signIn('127.0.0.8')).status).toBe(401);
    await sleep(WINDOW_MS + 200);
    expect((await signIn('127.0.0.7')).status).toBe(401);
  });

  it(`${UNAUTH} requests per window from an address without a known token, and the refused ones cost no query`, async () => {
    // What a request could cost: its token lookup, or an audit row. The pool's other statements (the panel's own
    // periodic reads and batched writes) run whenever they are due, so they are not counted against a request.
    const health = healthOf(panel.prisma);
    const requestCosts: string[] = [];
    const sent = health.sent.bind(health);
    health.sent = (text: unknown) => {
      if (typeof text === 'string' && /"(api_tokens|audit_events)"/.test(text)) requestCosts.push(text);
      sent(text);
    };
    try {
      const wrong = () => call('127.0.0.9', 'GET', '/v1/teams', { authorization: `Bearer tth_op_made_up_${Math.random()}` });
      const answered = await times(UNAUTH, wrong);
      expect(answered.every((a) => a.status === 401)).toBe(true);
      // The answered ones were looked up: what is recorded here is what a refused one would cost.
      expect(requestCosts.length).toBeGreaterThanOrEqual(UNAUTH);
      requestCosts.length = 0;
      const refused = await times(20, wrong);
      expect(refused.every((a) => a.status === 429 && a.code === 'RATE_LIMITED')).toBe(true);
      expect(requestCosts).toEqual([]);
    } finally {
      health.sent = sent;
    }
    // No token at all counts to the same bucket; another address does not.
    expect((await call('127.0.0.9', 'GET', '/v1/teams')).status).toBe(429);
    expect((await call('127.0.0.10', 'GET', '/v1/teams')).status).toBe(401);
    // Probes are never limited.
    expect((await call('127.0.0.9', 'GET', '/healthz')).status).toBe(200);
  });

  it(`${PER_TOKEN} requests per window with a verified token, then 429; the address's own bucket is not what holds it`, async () => {
    const ok = () => call('127.0.0.11', 'GET', '/v1/teams', { authorization: `Bearer ${panel.operatorToken}` });
    // The first request is counted to the address (the token is not known yet), the next to the token.
    const answers = await times(PER_TOKEN + 5, ok);
    expect(answers.slice(0, PER_TOKEN + 1).every((a) => a.status === 200)).toBe(true);
    expect(answers.slice(PER_TOKEN + 1).every((a) => a.status === 429 && a.code === 'RATE_LIMITED')).toBe(true);
    // Same address, no token: its own bucket still has room.
    expect((await call('127.0.0.11', 'GET', '/v1/teams')).status).toBe(401);
  });
});
