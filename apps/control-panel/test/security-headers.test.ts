import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestPostgres, type TestPostgres } from '@tether/testkit';
import { startPanel, type Panel } from './helpers/panel-harness.js';

// Headers every answer must carry or must not (issue 25: on the main this test
// was written against, an https panel sent no Strict-Transport-Security, the
// fleet page's 404s had none of its security headers, and its 403 repeated
// part of the request's Sec-Fetch-Site header).

let pg: TestPostgres;
let https: Panel;
let plain: Panel;

beforeAll(async () => {
  pg = await startTestPostgres();
  [https, plain] = await Promise.all([startPanel({ pg, env: { TETHER_PUBLIC_URL: 'https://panel.example.test' } }), startPanel({ pg })]);
}, 60_000);
afterAll(async () => {
  await Promise.all([https?.close(), plain?.close()]);
  await pg?.stop();
});

describe('security headers', () => {
  it('HSTS on every answer of a panel whose public URL is https (200, 401, 404), never on a plain-http one', async () => {
    for (const path of ['/healthz', '/v1/teams', '/no/such/path', '/dashboard/api/me']) {
      const res = await fetch(`${https.url}${path}`);
      expect(res.headers.get('strict-transport-security'), path).toBe('max-age=31536000');
      expect((await fetch(`${plain.url}${path}`)).headers.get('strict-transport-security'), path).toBeNull();
    }
  });

  it("the fleet page's security headers on its 404s and errors too", async () => {
    for (const path of ['/dashboard/assets/nope.js', '/dashboard/no/such/page', '/dashboard/api/nodes/x']) {
      const res = await fetch(`${plain.url}${path}`);
      expect(res.status, path).toBeGreaterThanOrEqual(400);
      expect(res.headers.get('content-security-policy'), path).toContain("frame-ancestors 'none'");
      expect(res.headers.get('x-frame-options'), path).toBe('DENY');
      expect(res.headers.get('x-content-type-options'), path).toBe('nosniff');
    }
    // Not on the REST API's answers (they are not pages).
    expect((await fetch(`${plain.url}/v1/teams`)).headers.get('x-frame-options')).toBeNull();
  });

  it('a refused cross-site request does not repeat its Sec-Fetch-Site header', async () => {
    const res = await fetch(`${plain.url}/dashboard/api/sign-out`, { method: 'POST', headers: { origin: plain.url, 'sec-fetch-site': 'cross-site-marker-7731' } });
    expect(res.status).toBe(403);
    expect(await res.text()).not.toContain('marker-7731');
  });
});
