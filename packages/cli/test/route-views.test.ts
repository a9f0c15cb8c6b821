import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answeringPanel } from './helpers/answering-panel.js';

// `tether status` and `tether routes` as a person reads route health: the
// ROUTES column, the failing route and the certificate expiring soon under its
// service, the certificate's days left and last error. The panel here is a
// server answering what GET /v1/status and /v1/routes answer (the real panel
// and agent: apps/control-panel/test/e2e-route-health.test.ts).

const DAY_MS = 86_400_000;
const at = (ms: number) => new Date(Date.now() + ms).toISOString();
const probe = { domain: 'x', pathPrefix: null, state: 'failing', at: at(0), status: 502, madeBy: 'proxy', error: null, latencyMs: 4, sessionId: 'ses_1' };
const cert = (days: number, lastError: string | null = null) => ({ issuer: 'CN=Pebble Intermediate CA 5e1f', notBefore: at(-DAY_MS), notAfter: at(days * DAY_MS + 3_600_000), serial: '1f', lastError });
const routes = [
  { id: 'r1', domain: 'shop.example.com', pathPrefix: null, serviceId: 's1', health: { state: 'serving', reason: 'the app answered 200 in 3 ms', evidence: { ...probe, state: 'serving', status: 200, madeBy: 'app' } }, certificate: cert(80) },
  { id: 'r2', domain: 'shop.example.com', pathPrefix: '/api', serviceId: 's1', health: { state: 'failing', reason: 'the proxy answered 502 after 4 ms', evidence: probe }, certificate: cert(5) },
  { id: 'r3', domain: 'new.example.com', pathPrefix: null, serviceId: 's1', health: { state: 'unknown', reason: 'dns-elsewhere: new.example.com points at 192.0.2.7, not this host', evidence: null }, certificate: { ...cert(0), notAfter: null, issuer: null, lastError: 'no certificate: issuance failed' } },
  { id: 'r4', domain: 'api.example.com', pathPrefix: null, serviceId: 's2', health: { state: 'serving', reason: 'the app answered 200 in 2 ms', evidence: { ...probe, state: 'serving', status: 200, madeBy: 'app' } }, certificate: null },
];
const service = (id: string, name: string, own: typeof routes | undefined) => ({
  serviceId: id,
  name,
  teamId: 't1',
  node: { id: 'n1', name: 'web-1' },
  state: 'running',
  desiredReplicas: 1,
  runningReplicas: 1,
  reason: '1/1 running, reported by session ses_1',
  containers: [],
  evidence: { sessionId: 'ses_1', lastFrameAgeMs: 20, reportAgeMs: 20 },
  ...(own ? { routes: own } : {}),
});
const answers: Record<string, unknown> = {
  '/v1/status': {
    services: [
      service('s1', 'shop', routes.filter((r) => r.serviceId === 's1')),
      service('s2', 'api', routes.filter((r) => r.serviceId === 's2')),
      service('s3', 'worker', []),
      // A panel from before route health in status.
      service('s4', 'old', undefined),
    ],
  },
  '/v1/services': [{ id: 's1', name: 'shop' }],
  '/v1/services/s1/status': service('s1', 'shop', routes.filter((r) => r.serviceId === 's1')),
  '/v1/routes': routes,
};

const panel = answeringPanel(answers, 'routes');
beforeAll(() => panel.start());
afterAll(() => panel.stop());
const run = (argv: string[]) => panel.run(argv);

describe('route health in the CLI', () => {
  it('tether status: a ROUTES column, and under a service its failing route and its certificates that expire soon or fail', async () => {
    const { code, stdout } = await run(['status']);
    expect(code).toBe(0);
    const lines = stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^NAME +STATE +REPLICAS +NODE +ROUTES +REASON$/);
    expect(lines[1]).toMatch(/^shop +running +1\/1 +web-1 +1\/3 serving +1\/1 running/);
    // Under shop, in the API's order: the failing route, its certificate (5 days: soon), the one in error.
    expect(lines.slice(2, 5)).toEqual([
      '  ↳ shop.example.com/api failing: the proxy answered 502 after 4 ms',
      '  ↳ shop.example.com/api certificate expires in 5 d (soon)',
      '  ↳ new.example.com certificate error: no certificate: issuance failed',
    ]);
    // 80 days left and serving: nothing under it; no routes (or a panel that sends none): "-".
    expect(lines[5]).toMatch(/^api +running +1\/1 +web-1 +1\/1 serving +1\/1 running/);
    expect(lines[6]).toMatch(/^worker +running +1\/1 +web-1 +- +1\/1 running/);
    expect(lines[7]).toMatch(/^old +running +1\/1 +web-1 +- +1\/1 running/);
    expect(lines).toHaveLength(8);
  });

  it('tether status <service>: every route with its health, certificate and issuer', async () => {
    const { code, stdout } = await run(['status', 'shop']);
    expect(code).toBe(0);
    expect(stdout).toContain('routes: 1/3 serving\n');
    expect(stdout).toContain('  shop.example.com: serving; certificate expires in 80 d from CN=Pebble Intermediate CA 5e1f\n');
    expect(stdout).toContain('  shop.example.com/api: failing: the proxy answered 502 after 4 ms; certificate expires in 5 d (soon) from CN=Pebble Intermediate CA 5e1f\n');
    // A reason this CLI has no word for is printed as the panel gives it.
    expect(stdout).toContain('  new.example.com: unknown: dns-elsewhere: new.example.com points at 192.0.2.7, not this host; certificate error: no certificate: issuance failed\n');
  });

  it('tether routes: a CERTIFICATE column with the days left and the last error; "-" until one is seen', async () => {
    const { code, stdout } = await run(['routes']);
    expect(code).toBe(0);
    const lines = stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^DOMAIN +PATH +SERVICE +HEALTH +CERTIFICATE +ID$/);
    const cell = (domain: string, prefix: string) => lines.find((l) => l.startsWith(`${domain} `) && l.split(/ {2,}/)[1] === prefix)!.split(/ {2,}/)[4];
    expect(cell('shop.example.com', '/')).toBe('expires in 80 d');
    expect(cell('shop.example.com', '/api')).toBe('expires in 5 d (soon)');
    expect(cell('new.example.com', '/')).toBe('error: no certificate: issuance failed');
    expect(cell('api.example.com', '/')).toBe('-');
    // Services by name; one the token does not list keeps its id.
    const service = (domain: string) => lines.find((l) => l.startsWith(`${domain} `))!.split(/ {2,}/)[2];
    expect(service('shop.example.com')).toBe('shop');
    expect(service('api.example.com')).toBe('s2');
  });
});
