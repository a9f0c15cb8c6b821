import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAPABILITIES, type PanelMessage, type RouteProbe } from '@tether/protocol';
import { CHROMIUM_ARGS, CHROMIUM_PATH, ensureChromium, resultsDir } from '@tether/testkit';
import { generateToken, hashToken } from '../src/domain/tokens.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';

// The fleet page in a real browser (Debian's chromium, driven by
// playwright-core) against a real panel with raw agents: sign in, live rows,
// a silent agent turning unreachable with its reason in time, the drift flag,
// keyboard navigation and labelled controls, the node page (a route turning
// from failing to serving live, with its certificate; its allocations, a
// replica moved by failover saying from where, turning failed live;
// evacuating live), sign-out; a customer
// token is refused; and no console errors on the way.

const ready = (await ensureChromium()).available;
const IDLE_MS = 1_500;
const HEARTBEAT_MS = 250;
/** The page's promise: unreachable within the deadline plus one batch (1 s). */
const BATCH_MS = 1_000;
/** Time for the browser to render the batch and the test to see it. */
const OBSERVE_MS = 300;
const screenshots = path.join(resultsDir, 'dashboard');

describe.skipIf(!ready)('fleet page in chromium', () => {
  let panel: Panel;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  const agents: Record<string, RawAgent> = {};
  let shopId: string;
  const consoleErrors: string[] = [];

  /** An agent that reports the routing it is sent as applied (in sync), or keeps reporting none (drifting). */
  async function connect(name: string, inSync: boolean): Promise<RawAgent> {
    const node = await panel.createNode(name);
    const agent = await RawAgent.connect({ url: panel.url, token: node.token, node: name, heartbeatMs: HEARTBEAT_MS });
    if (inSync) agent.appliedHash = (await agent.waitFor<Extract<PanelMessage, { type: 'routing.map' }>>((m) => m.type === 'routing.map')).hash;
    return agent;
  }

  beforeAll(async () => {
    mkdirSync(screenshots, { recursive: true });
    panel = await startPanel({
      env: {
        TETHER_SESSION_IDLE_MS: String(IDLE_MS),
        TETHER_HEARTBEAT_INTERVAL_MS: String(HEARTBEAT_MS),
        TETHER_FLEET_REFRESH_MS: '300',
        // Drift is flagged after one push cycle of mismatch.
        TETHER_RECONCILE_INTERVAL_MS: '1000',
      },
    });
    agents.alpha = await connect('web-alpha', true);
    // A service web-alpha should run and does not: the row says 0 / 1, its page says why.
    const alpha = await panel.prisma.node.findUniqueOrThrow({ where: { name: 'web-alpha' } });
    const service = await panel.createService(alpha.id, 'shop');
    shopId = service.id;
    await panel.prisma.deployment.create({ data: { serviceId: service.id, nodeId: alpha.id, spec: {}, status: 'running' } });
    agents.bravo = await connect('web-bravo', true);
    agents.drift = await connect('web-drift', false);
    browser = await chromium.launch({ executablePath: CHROMIUM_PATH, args: [...CHROMIUM_ARGS] });
    context = await browser.newContext({ viewport: { width: 1600, height: 900 } });
    page = await context.newPage();
    page.on('console', (m) => {
      if (m.type() === 'error') consoleErrors.push(m.text());
    });
    page.on('pageerror', (e) => consoleErrors.push(e.message));
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    for (const a of Object.values(agents)) a.close();
    await panel?.close();
  });

  const row = (name: string) => page.locator(`tr[data-node="${name}"]`);

  it('refuses a customer token at sign-in (and sets no cookie)', async () => {
    const team = await panel.prisma.team.create({ data: { name: `browser-team-${Date.now()}` } });
    const customer = generateToken('customer');
    await panel.prisma.apiToken.create({ data: { name: 'c', role: 'customer', teamId: team.id, tokenHash: hashToken(customer) } });
    const other = await browser.newContext();
    const p = await other.newPage();
    await p.goto(`${panel.url}/dashboard`);
    await p.getByLabel('Operator token').fill(customer);
    await p.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => p.getByRole('alert').textContent(), { timeout: 5_000 }).toMatch(/only operator tokens/);
    expect(await other.cookies()).toEqual([]);
    await other.close();
  });

  it('signs in with an operator token and lists the live sessions', async () => {
    await page.goto(`${panel.url}/dashboard`);
    await page.getByLabel('Operator token').fill(panel.operatorToken);
    await page.getByRole('button', { name: 'Sign in' }).click();
    for (const name of ['web-alpha', 'web-bravo', 'web-drift']) {
      await expect.poll(() => row(name).locator('td.state').textContent(), { timeout: 5_000 }).toBe('● reachable');
    }
    // The token is nowhere in the page's URL or storage; the cookie is HttpOnly and SameSite=Strict.
    expect(page.url()).not.toContain(panel.operatorToken);
    const storage = await page.evaluate<string>('JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }) + document.cookie + location.href');
    expect(storage).not.toContain(panel.operatorToken);
    const [cookie] = await context.cookies();
    expect(cookie).toMatchObject({ name: 'tether_dashboard', httpOnly: true, sameSite: 'Strict' });
    expect(cookie!.expires).toBeGreaterThan(Date.now() / 1000);
    expect(cookie!.value).not.toContain(panel.operatorToken);
  });

  it('flags the node whose applied routing drifts, and only it', async () => {
    await expect.poll(() => row('web-drift').textContent(), { timeout: 5_000 }).toContain('⚠ drifting');
    await expect.poll(() => row('web-alpha').locator('td').nth(7).textContent(), { timeout: 5_000 }).toBe('0 / 1');
    expect(await row('web-alpha').textContent()).not.toContain('drifting');
  });

  it('says in words which node is cordoned, live, and shows its labels on its page', async () => {
    const alpha = await panel.prisma.node.findUniqueOrThrow({ where: { name: 'web-alpha' } });
    expect((await panel.api('PATCH', `/v1/nodes/${alpha.id}`, { labels: { zone: 'eu-1', 'tether.io/ingress': 'true' } })).status).toBe(200);
    expect((await panel.api('POST', `/v1/nodes/${alpha.id}/cordon`)).status).toBe(200);
    await expect.poll(() => row('web-alpha').locator('td.state').textContent(), { timeout: 5_000 }).toBe('● reachable ⊘ cordoned');
    expect(await row('web-drift').locator('td.state').textContent()).toBe('● reachable');
    await row('web-alpha').locator('th a').click();
    await expect.poll(() => page.locator('dd.labels').textContent(), { timeout: 5_000 }).toBe('tether.io/ingress=true, zone=eu-1');
    expect(await page.locator('dd.placement').textContent()).toMatch(/^⊘ cordoned/);
    expect((await panel.api('POST', `/v1/nodes/${alpha.id}/uncordon`)).status).toBe(200);
    await expect.poll(() => page.locator('dd.placement').textContent(), { timeout: 5_000 }).toBe('takes new services');
    await page.getByRole('link', { name: '← All nodes' }).click();
    await expect.poll(() => row('web-alpha').locator('td.state').textContent(), { timeout: 5_000 }).toBe('● reachable');
  });

  it('turns a silent node unreachable with reason "idle timeout" within the deadline + 1 s, without a reload', async () => {
    agents.bravo!.goSilent();
    await row('web-bravo').and(page.locator('[data-state="unreachable"]')).waitFor({ timeout: IDLE_MS + BATCH_MS + 5_000 });
    const elapsed = performance.now() - agents.bravo!.lastSentAt;
    await expect.poll(() => row('web-bravo').locator('td.why .reason').textContent(), { timeout: 5_000 }).toBe('idle timeout');
    await expect.poll(() => row('web-bravo').locator('td.state').textContent(), { timeout: 5_000 }).toBe('✕ unreachable');
    // From the agent's last frame: not before the deadline, not later than a batch after it.
    expect(elapsed).toBeGreaterThanOrEqual(IDLE_MS);
    expect(elapsed).toBeLessThanOrEqual(IDLE_MS + BATCH_MS + OBSERVE_MS);
    // Problems first: the unreachable node heads the table.
    await expect.poll(() => page.locator('tbody tr[data-node]').first().getAttribute('data-node'), { timeout: 5_000 }).toBe('web-bravo');
    await page.screenshot({ path: path.join(screenshots, 'fleet.png'), fullPage: true });
  });

  it('has labelled controls and a table the keyboard can walk', async () => {
    await page.getByLabel('Search').waitFor({ state: 'visible', timeout: 5_000 });
    await page.getByLabel('Show').waitFor({ state: 'visible', timeout: 5_000 });
    await page.getByLabel('Sort by').waitFor({ state: 'visible', timeout: 5_000 });
    await page.getByRole('button', { name: 'Sign out' }).waitFor({ state: 'visible', timeout: 5_000 });
    await page.getByLabel('Sort by').focus();
    await page.keyboard.press('Tab');
    const focused = () => page.evaluate<string | null>("document.activeElement?.getAttribute('data-node') ?? document.activeElement?.tagName ?? null");
    expect(await focused()).toBe('web-bravo');
    // Problems first: the unreachable node, the drifting one, then the rest.
    await page.keyboard.press('ArrowDown');
    await expect.poll(focused, { timeout: 2_000 }).toBe('web-drift');
    await page.keyboard.press('End');
    await expect.poll(focused, { timeout: 2_000 }).toBe('web-alpha');
    await page.keyboard.press('Home');
    await expect.poll(focused, { timeout: 2_000 }).toBe('web-bravo');
    // Search narrows the rows; a filter keeps only the unreachable.
    await page.getByLabel('Search').fill('alpha');
    await expect.poll(() => page.locator('tbody tr[data-node]').count(), { timeout: 5_000 }).toBe(1);
    await page.getByLabel('Search').fill('');
    await page.getByLabel('Show').selectOption('unreachable');
    await expect.poll(() => page.locator('tbody tr[data-node]').count(), { timeout: 5_000 }).toBe(1);
    await page.getByLabel('Show').selectOption('all');
    // Enter opens the focused node's page.
    await row('web-bravo').focus();
    await page.keyboard.press('Enter');
    await expect.poll(() => page.url(), { timeout: 5_000 }).toMatch(/\/dashboard\/nodes\//);
  });

  it('shows the node page: why it is unreachable, its session timeline with reasons', async () => {
    await page.getByRole('heading', { name: /web-bravo/ }).waitFor({ state: 'visible', timeout: 5_000 });
    await expect.poll(() => page.locator('dl.facts').textContent(), { timeout: 5_000 }).toContain('idle timeout since');
    const timeline = page.getByRole('table', { name: 'Session timeline' });
    await expect.poll(() => timeline.textContent(), { timeout: 5_000 }).toContain('▼ closed');
    await expect.poll(() => timeline.textContent(), { timeout: 5_000 }).toContain('(code 4000)');
    await expect.poll(() => timeline.textContent(), { timeout: 5_000 }).toContain('▲ opened');
    await page.screenshot({ path: path.join(screenshots, 'node.png'), fullPage: true });
    await page.getByRole('link', { name: '← All nodes' }).click();
    await row('web-alpha').waitFor({ state: 'visible', timeout: 5_000 });
    // A reachable node's page: its service with the status and the session that proves it.
    await row('web-alpha').getByRole('link', { name: 'web-alpha' }).click();
    const services = page.getByRole('table', { name: 'Services' });
    await expect.poll(() => services.textContent(), { timeout: 5_000 }).toContain('shop');
    expect(await services.textContent()).toMatch(/down.*0 \/ 1.*0\/1 running, reported by session ses_/);
    await page.screenshot({ path: path.join(screenshots, 'node-services.png'), fullPage: true });
    await page.getByRole('link', { name: '← All nodes' }).click();
    await row('web-alpha').waitFor({ state: 'visible', timeout: 5_000 });
  });

  it("lists a node's routes: failing with the proxy's answer and the certificate's expiry and error, then serving, live", async () => {
    await panel.prisma.route.create({ data: { domain: 'shop.fleet.test', pathPrefix: null, serviceId: shopId } });
    await panel.prisma.route.create({ data: { domain: 'elsewhere.fleet.test', pathPrefix: null, serviceId: shopId } });
    const notAfter = new Date(Date.now() + 10 * 86_400_000 + 3_600_000).toISOString();
    const probe = (over: Partial<RouteProbe>): RouteProbe => ({
      domain: 'shop.fleet.test',
      pathPrefix: null,
      state: 'failing',
      at: new Date().toISOString(),
      status: 502,
      madeBy: 'proxy',
      error: null,
      latencyMs: 12,
      certificate: { issuer: 'CN=Pebble Intermediate CA 1a2b3c', notBefore: new Date().toISOString(), notAfter, serial: '1f2e', lastError: 'tls: handshake failure' },
      ...over,
    });
    // Not probed: its DNS points elsewhere (the agent's words and addresses, shown as they come).
    const why = 'elsewhere.fleet.test resolves to 192.0.2.10, not to this host (198.51.100.7): no certificate requested';
    const elsewhere = probe({
      domain: 'elsewhere.fleet.test',
      status: null,
      madeBy: 'none',
      error: why,
      latencyMs: 1,
      notProbed: { reason: 'dns-elsewhere', resolved: ['192.0.2.10'], hostAddresses: ['198.51.100.7'] },
      certificate: { issuer: null, notBefore: null, notAfter: null, serial: null, lastError: why },
    });
    // What the agent's heartbeats carry from now on (capability routes.probe).
    agents.alpha!.routingExtra = { probeIntervalMs: 30_000, probes: [probe({}), elsewhere] };
    await row('web-alpha').getByRole('link', { name: 'web-alpha' }).click();
    const routes = page.getByRole('table', { name: 'Routes' });
    const route = routes.locator('tr[data-route="shop.fleet.test"]');
    await expect.poll(() => route.locator('td.route').textContent(), { timeout: 5_000 }).toBe('failing');
    const text = (await route.textContent())!;
    expect(text).toContain('shop');
    expect(text).toContain('the proxy answered 502 after 12 ms');
    expect(text).toMatch(/status 502 made by proxy · 12 ms · at .* · session ses_/);
    // 10 days and an hour left: 10 whole days, under the 14-day bound (flagged); the handshake's error.
    expect(await route.locator('.cert-expiry').textContent()).toBe(' · expires in 10 d ⚠');
    expect(text).toContain('CN=Pebble Intermediate CA 1a2b3c');
    expect(await route.locator('.cert-error').textContent()).toBe(' · ✕ tls: handshake failure');
    const other = routes.locator('tr[data-route="elsewhere.fleet.test"]');
    expect(await other.locator('td.route').textContent()).toBe('unknown');
    const otherText = (await other.textContent())!;
    expect(otherText).toContain(`dns-elsewhere: ${why}`);
    expect(otherText).toContain('notProbed: reason dns-elsewhere; resolved 192.0.2.10; hostAddresses 198.51.100.7');
    expect(otherText).not.toContain('no answer');
    await page.screenshot({ path: path.join(screenshots, 'node-routes.png'), fullPage: true });

    // The app answers again and the certificate is good: the page follows the stream, no reload.
    const changedAt = performance.now();
    agents.alpha!.routingExtra = {
      probeIntervalMs: 30_000,
      probes: [probe({ state: 'serving', status: 200, madeBy: 'app', at: new Date().toISOString(), certificate: { ...probe({}).certificate!, lastError: null } }), elsewhere],
    };
    await expect.poll(() => route.locator('td.route').textContent(), { timeout: 5_000 }).toBe('serving');
    const took = performance.now() - changedAt;
    console.log(`route serving on the page ${Math.round(took)} ms after the agent's report changed`);
    // One heartbeat, one batch, one read of the node's detail.
    expect(took).toBeLessThanOrEqual(HEARTBEAT_MS + BATCH_MS + 2_000);
    expect(await route.textContent()).toContain('the app answered 200 in 12 ms');
    expect(await route.locator('.cert-error').count()).toBe(0);
    expect(await route.locator('.evidence').count()).toBe(0);
    await page.getByRole('link', { name: '← All nodes' }).click();
    await row('web-alpha').waitFor({ state: 'visible', timeout: 5_000 });
  });

  it("lists a node's allocations on its page (a moved replica says from where), and says evacuating live", async () => {
    // Allocation rows written as the scheduler writes them; its loop stopped, it places nothing over them.
    await panel.app.scheduler.stop();
    const charlie = await panel.createNode('web-charlie');
    agents.charlie = await RawAgent.connect({ url: panel.url, token: charlie.token, node: charlie.name, heartbeatMs: HEARTBEAT_MS, capabilities: [CAPABILITIES.WORKLOAD_ALLOCATIONS] });
    await panel.settled();
    const cart = await panel.createService(charlie.id, 'cart');
    const release = await panel.prisma.deployment.create({ data: { serviceId: cart.id, nodeId: charlie.id, spec: {}, status: 'running' } });
    const moved = await panel.prisma.allocation.create({
      data: {
        serviceId: cart.id, nodeId: charlie.id, releaseId: release.id, cause: 'node-lost', epoch: 1n,
        movedFrom: { allocationId: 'gone', nodeId: 'n-x1', nodeName: 'x1', unreachableSince: '2026-12-05T03:10:00.000Z', teardownReason: 'IDLE_TIMEOUT: no frame' },
      },
    });
    agents.charlie.send({
      type: 'allocations.status', id: 'b-1', ref: null,
      allocations: [{ allocationId: moved.id, serviceId: cart.id, deploymentId: release.id, runningDeploymentId: release.id, state: 'running', containerId: 'c1', health: 'healthy', code: null, reason: null, since: '2026-12-05T03:11:00.000Z' }],
    });
    await page.goto(`${panel.url}/dashboard/nodes/${charlie.id}`);
    const line = page.locator(`tr[data-allocation="${moved.id}"]`);
    await expect.poll(() => line.locator('.alloc-state').textContent(), { timeout: 5_000 }).toBe('running');
    expect(await line.locator('th').textContent()).toBe('cart');
    expect(await line.locator('td').nth(0).textContent()).toBe(release.id.slice(-8));
    expect(await line.locator('.alloc-health').textContent()).toBe('healthy');
    expect(await line.locator('.alloc-moved').textContent()).toMatch(/^moved from x1 \(unreachable since 2026-12-05T03:10:00.000Z, torn down for IDLE_TIMEOUT: no frame\) to web-charlie at \S+$/);
    // The count is the node directory's (read every 300 ms here).
    await expect.poll(() => page.locator('dd.replicas').textContent(), { timeout: 5_000 }).toBe('1');
    // Its node reports it failed: the page says so without a reload (directory refresh, a batch, the detail read again).
    const failedAt = Date.now();
    agents.charlie.send({
      type: 'allocations.status', id: 'b-2', ref: null,
      allocations: [{ allocationId: moved.id, serviceId: cart.id, deploymentId: release.id, runningDeploymentId: null, state: 'failed', containerId: null, health: 'none', code: 'IMAGE_PULL_FAILED', reason: 'no such image', since: '2026-12-05T03:12:00.000Z' }],
    });
    await expect.poll(() => line.locator('.alloc-state').textContent(), { timeout: 5_000 }).toBe('failed — IMAGE_PULL_FAILED: no such image');
    console.log(`allocation failed on the page ${Date.now() - failedAt} ms after its node reported it`);
    expect(Date.now() - failedAt).toBeLessThanOrEqual(300 + BATCH_MS + 2_000);
    await page.screenshot({ path: path.join(screenshots, 'node-allocations.png'), fullPage: true });
    expect((await panel.api('POST', `/v1/nodes/${charlie.id}/evacuate`)).status).toBe(200);
    await expect.poll(() => page.locator('dd.placement').textContent(), { timeout: 5_000 }).toMatch(/^⇥ evacuating/);
    await page.getByRole('link', { name: '← All nodes' }).click();
    await expect.poll(() => row('web-charlie').locator('td.state').textContent(), { timeout: 5_000 }).toBe('● reachable ⇥ evacuating');
  });

  it('refuses a cross-origin POST even with the cookie, and /v1 never takes the cookie', async () => {
    const [cookie] = await context.cookies();
    const header = `${cookie!.name}=${cookie!.value}`;
    const foreign = await fetch(`${panel.url}/dashboard/api/sign-out`, { method: 'POST', headers: { cookie: header, origin: 'http://evil.example' } });
    expect(foreign.status).toBe(403);
    expect(foreign.headers.get('set-cookie')).toBeNull();
    const crossSite = await fetch(`${panel.url}/dashboard/api/sign-out`, {
      method: 'POST',
      headers: { cookie: header, origin: panel.url, 'sec-fetch-site': 'cross-site' },
    });
    expect(crossSite.status).toBe(403);
    const v1 = await fetch(`${panel.url}/v1/sessions`, { headers: { cookie: header } });
    expect(v1.status).toBe(401);
    // Still signed in: none of that signed the page out.
    await expect.poll(() => row('web-alpha').locator('td.state').textContent(), { timeout: 5_000 }).toBe('● reachable');
  });

  it('sign-out clears the cookie and shows the sign-in form; no console errors on the way', async () => {
    // The stream's signed-out event can show the form before the sign-out's own answer (which
    // clears the cookie) has arrived: the cookie is judged once that answer is in.
    const answered = page.waitForResponse((r) => r.url().endsWith('/dashboard/api/sign-out') && r.request().method() === 'POST');
    await page.getByRole('button', { name: 'Sign out' }).click();
    const answer = await answered;
    expect(answer.status()).toBe(204);
    await answer.finished();
    await page.getByLabel('Operator token').waitFor({ state: 'visible', timeout: 5_000 });
    expect(await context.cookies()).toEqual([]);
    await page.reload();
    await page.getByLabel('Operator token').waitFor({ state: 'visible', timeout: 5_000 });
    expect(consoleErrors).toEqual([]);
  });
});
