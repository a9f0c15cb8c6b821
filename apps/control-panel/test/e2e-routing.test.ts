import { stat } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentMessage } from '@tether/protocol';
import { dockerApi, ensureCaddy, ensureDocker, sleep, startTestPostgres, waitFor, type TestPostgres } from '@tether/testkit';
import { ensureEchoImage } from './helpers/echo-image.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import {
  attachRoute,
  containerHostname,
  containersOf,
  createTeam,
  deploy,
  deployEchoService,
  getThroughProxy,
  holdWebSocket,
  reloadsOf,
  routingSettled,
  sessionRow,
  startRoutedHost,
  type RoutedHost,
} from './helpers/routed-host.js';

// Incident 2 through the whole system: a real panel (Postgres, REST, agent
// gateway, routing reconciler), real agent processes, each running its own
// Caddy 2.6 container on its own Docker network, and real service containers
// behind it. Everything is read the way an operator reads it: GET /v1/sessions
// and GET /v1/nodes/:id/reloads; the panel's push counter proves the pushes
// happened. The first configuration of an empty Caddy is a counted reload on
// the agent, so "zero reloads" is measured as no change from the settled count.

const PUSHES_PER_DAY = (24 * 60) / 5;
const ready = (await ensureDocker()).available && (await ensureCaddy()).available;
/** Short, unique per run: node names end up in container names and socket paths. */
const tag = process.pid.toString(36);

let pg: TestPostgres;
let image: string;
const hosts: RoutedHost[] = [];
const panels: Panel[] = [];

async function panelWith(env: Record<string, string>): Promise<Panel> {
  const panel = await startPanel({ pg, env: { TETHER_HEARTBEAT_INTERVAL_MS: '200', ...env } });
  panels.push(panel);
  return panel;
}

async function host(panel: Panel, name: string, env?: Record<string, string>): Promise<RoutedHost> {
  const h = await startRoutedHost(panel, `${name}-${tag}`, env);
  hosts.push(h);
  return h;
}

async function destroy(...gone: RoutedHost[]): Promise<void> {
  for (const h of gone) hosts.splice(hosts.indexOf(h), 1);
  await Promise.all(gone.map((h) => h.agent.destroy()));
}

const settled = (panel: Panel, h: RoutedHost) =>
  waitFor(async () => routingSettled(await sessionRow(panel, h.nodeId)), { timeoutMs: 15_000, message: `${h.nodeName}: applied hash == desired hash` });

/** Changes whenever the agent replaces (new inode) or rewrites (mtime, size) its Caddy config file. */
async function configFileIdentity(h: RoutedHost): Promise<string> {
  const s = await stat(path.join(h.agent.stateDir, 'caddy.json'), { bigint: true });
  return `${s.ino}:${s.mtimeNs}:${s.size}`;
}

/** Routes a domain to a freshly deployed echo service and waits until Caddy serves it from that container. */
async function routedService(panel: Panel, h: RoutedHost, teamId: string, name: string, domain: string) {
  const service = await deployEchoService(panel, h, teamId, image, name);
  await attachRoute(panel, service.serviceId, domain);
  const expected = await containerHostname(service.deploymentId);
  await waitFor(async () => (await getThroughProxy(h, domain)).body === expected, { timeoutMs: 15_000, message: `${domain} served through Caddy` });
  await settled(panel, h);
  return { ...service, domain };
}

/**
 * Records the agent's routing.applied answers in the order the panel receives them, each with the time
 * the agent's ACK of that push arrived: the agent ACKs a map on receipt and applies maps one at a time
 * in order, so an answer whose ACK came after an instant was applied wholly after it.
 */
function recordApplied(panel: Panel, nodeId: string) {
  const answers: Array<{ changed: boolean; reloaded: boolean; error: string | null; ackedAt: number }> = [];
  const ackedAt = new Map<string, number>();
  const listener = (session: { nodeId: string }, message: AgentMessage) => {
    if (session.nodeId !== nodeId) return;
    if (message.type === 'ack') ackedAt.set(message.ref, Date.now());
    if (message.type !== 'routing.applied') return;
    answers.push({ changed: message.changed, reloaded: message.reloaded, error: message.error, ackedAt: ackedAt.get(message.ref) ?? Number.NEGATIVE_INFINITY });
  };
  const unobserve = panel.app.agentSide.frames.observe(listener);
  const count = (pick: (a: (typeof answers)[number]) => unknown) => answers.filter(pick).length;
  return {
    answers,
    summary: () => ({ total: answers.length, changed: count((a) => a.changed), reloaded: count((a) => a.reloaded), errors: count((a) => a.error) }),
    stop: unobserve,
  };
}

beforeAll(async () => {
  if (!ready) return;
  pg = await startTestPostgres();
  image = await ensureEchoImage();
});

afterAll(async () => {
  await Promise.all(hosts.splice(0).map((h) => h.agent.destroy()));
  for (const panel of panels.splice(0)) await panel.close();
  await pg?.stop();
});

describe.skipIf(!ready)('a day of unchanged pushes (reconcile interval 20 ms)', () => {
  let panel: Panel;
  let teamId: string;

  beforeAll(async () => {
    panel = await panelWith({ TETHER_RECONCILE_INTERVAL_MS: '20', TETHER_ROUTING_DEBOUNCE_MS: '100' });
    teamId = await createTeam(panel);
  });

  it('the incident: a WebSocket through Caddy survives 288 pushes; zero reloads, zero writes, applied == desired', async () => {
    const h = await host(panel, 'inc');
    const { domain } = await routedService(panel, h, teamId, 'chat', `chat.inc-${tag}.test`);
    const socket = await holdWebSocket(h, domain);
    expect(await socket.echo('before the pushes')).toBe('before the pushes');

    const before = await sessionRow(panel, h.nodeId);
    const reloadRows = (await reloadsOf(panel, h.nodeId)).length;
    const file = await configFileIdentity(h);
    const pushesBefore = panel.app.agentSide.routing.pushCount(h.nodeId);
    const applied = recordApplied(panel, h.nodeId);
    const started = Date.now();
    await waitFor(() => panel.app.agentSide.routing.pushCount(h.nodeId) >= pushesBefore + PUSHES_PER_DAY, {
      timeoutMs: 60_000,
      intervalMs: 10,
      message: `${PUSHES_PER_DAY} pushes`,
    });
    const elapsed = Date.now() - started;
    // The last answers and a heartbeat arrive after the last push was counted.
    await waitFor(() => applied.answers.length >= PUSHES_PER_DAY, { timeoutMs: 5_000, message: 'routing.applied for every push' });
    await sleep(400);
    applied.stop();

    const after = await sessionRow(panel, h.nodeId);
    console.info(`incident: ${PUSHES_PER_DAY} pushes in ${elapsed} ms; answers ${JSON.stringify(applied.summary())}; reloads ${before.reloads.total} -> ${after.reloads.total}`);
    expect(applied.summary()).toMatchObject({ changed: 0, reloaded: 0, errors: 0 });
    expect(after.reloads.total).toBe(before.reloads.total);
    expect(after.reloads.lastAt).toBe(before.reloads.lastAt);
    expect(after.routing.desiredHash).toBe(before.routing.desiredHash);
    expect(after.routing.appliedHash).toBe(after.routing.desiredHash);
    expect(after.routing.drifting).toBe(false);
    expect(await reloadsOf(panel, h.nodeId)).toHaveLength(reloadRows);
    expect(await configFileIdentity(h)).toBe(file);
    expect(socket.closeCode).toBeNull();
    expect(socket.open).toBe(true);
    expect(await socket.echo('still here after a day of pushes')).toBe('still here after a day of pushes');
    socket.close();
    await destroy(h);
  });

  it('fleet: three hosts (three Caddy containers on three networks) for a simulated day: zero reloads on every host', async () => {
    const fleet = await Promise.all(['fa', 'fb', 'fc'].map((name) => host(panel, name)));
    await Promise.all(fleet.map((h, i) => routedService(panel, h, teamId, `web${i}`, `web${i}.fleet-${tag}.test`)));

    const rows = await Promise.all(fleet.map((h) => sessionRow(panel, h.nodeId)));
    const pushesBefore = fleet.map((h) => panel.app.agentSide.routing.pushCount(h.nodeId));
    const started = Date.now();
    await waitFor(() => fleet.every((h, i) => panel.app.agentSide.routing.pushCount(h.nodeId) >= pushesBefore[i]! + PUSHES_PER_DAY), {
      timeoutMs: 90_000,
      intervalMs: 20,
      message: `${PUSHES_PER_DAY} pushes to every host`,
    });
    const elapsed = Date.now() - started;
    await sleep(400);

    const after = await Promise.all(fleet.map((h) => sessionRow(panel, h.nodeId)));
    console.info(`fleet: ${PUSHES_PER_DAY}+ pushes to each of 3 hosts in ${elapsed} ms; reloads ${rows.map((r) => r.reloads.total)} -> ${after.map((r) => r.reloads.total)}`);
    for (const [i, row] of after.entries()) {
      expect(row.reloads.total, fleet[i]!.nodeName).toBe(rows[i]!.reloads.total);
      expect(row.routing.appliedHash, fleet[i]!.nodeName).toBe(row.routing.desiredHash);
      expect(row.routing.drifting).toBe(false);
      expect((await getThroughProxy(fleet[i]!, `web${i}.fleet-${tag}.test`)).status).toBe(200);
    }
    // Three different maps, so the hosts really carry their own routes.
    expect(new Set(after.map((r) => r.routing.desiredHash)).size).toBe(3);
    await destroy(...fleet);
  });
});

describe.skipIf(!ready)('real routing changes (periodic push out of the way: 10 min)', () => {
  const DEBOUNCE_MS = 1_500;
  let panel: Panel;
  let h: RoutedHost;
  let shop: { serviceId: string; deploymentId: string };

  beforeAll(async () => {
    panel = await panelWith({ TETHER_RECONCILE_INTERVAL_MS: '600000', TETHER_ROUTING_DEBOUNCE_MS: String(DEBOUNCE_MS) });
    h = await host(panel, 'chg');
    shop = await deployEchoService(panel, h, await createTeam(panel), image, 'shop');
    await settled(panel, h);
  });

  const pushes = () => panel.app.agentSide.routing.pushCount(h.nodeId);

  it('attaching a domain: one push, no reload (the static proxy), the domain answers from the container', async () => {
    const domain = `shop.chg-${tag}.test`;
    const before = await sessionRow(panel, h.nodeId);
    const reloadRows = (await reloadsOf(panel, h.nodeId)).length;
    const pushesBefore = pushes();
    await attachRoute(panel, shop.serviceId, domain);

    const expected = await containerHostname(shop.deploymentId);
    await waitFor(async () => (await getThroughProxy(h, domain)).body === expected, { timeoutMs: DEBOUNCE_MS + 10_000, message: `${domain} served` });
    await settled(panel, h);
    // Long enough for a second push or reload to show up, were there one.
    await sleep(DEBOUNCE_MS);

    const after = await sessionRow(panel, h.nodeId);
    expect(pushes() - pushesBefore).toBe(1);
    expect(after.reloads.total).toBe(before.reloads.total);
    expect(after.routing.desiredHash).not.toBe(before.routing.desiredHash);
    expect(after.routing.appliedHash).toBe(after.routing.desiredHash);
    expect(await reloadsOf(panel, h.nodeId)).toHaveLength(reloadRows);
  });

  it('a burst of 20 attachments inside the debounce window: one push, no reload, all 20 answer', async () => {
    const domains = Array.from({ length: 20 }, (_, i) => `b${String(i).padStart(2, '0')}.burst-${tag}.test`);
    const before = await sessionRow(panel, h.nodeId);
    const pushesBefore = pushes();
    const started = Date.now();
    await Promise.all(domains.map((d) => attachRoute(panel, shop.serviceId, d)));
    // Otherwise the test would not be testing a burst inside one window. The bound is exact, not a margin:
    // each attachment signals its change before its answer is sent, and the window opens at the first
    // signal (after \`started\`), so answers all back within DEBOUNCE_MS put every change inside the window.
    const burstMs = Date.now() - started;
    console.info(`burst: 20 attachments answered in ${burstMs} ms (window ${DEBOUNCE_MS} ms)`);
    expect(burstMs).toBeLessThan(DEBOUNCE_MS);

    const expected = await containerHostname(shop.deploymentId);
    await waitFor(async () => (await getThroughProxy(h, domains.at(-1)!)).body === expected, { timeoutMs: DEBOUNCE_MS + 10_000, message: 'the last domain served' });
    await settled(panel, h);
    await sleep(DEBOUNCE_MS);

    const after = await sessionRow(panel, h.nodeId);
    expect(pushes() - pushesBefore).toBe(1);
    expect(after.reloads.total).toBe(before.reloads.total);
    for (const d of domains) expect((await getThroughProxy(h, d)).body, d).toBe(expected);
  });

  it('redeploying a routed service: zero reloads, config untouched, requests reach the new container', async () => {
    const domain = `shop.chg-${tag}.test`;
    const oldContainer = await containerHostname(shop.deploymentId);
    // This leaves Caddy a pooled keep-alive connection to the old container. When the agent detached old
    // containers from the network before stopping them, that connection was black-holed and the first
    // request after the redeploy hung (the 5 s timeout of getThroughProxy catches it).
    expect((await getThroughProxy(h, domain)).body).toBe(oldContainer);
    const before = await sessionRow(panel, h.nodeId);
    const file = await configFileIdentity(h);
    const pushesBefore = pushes();

    const next = await deploy(panel, shop.serviceId);
    await waitFor(async () => (await containersOf(shop.deploymentId)) === 0, { timeoutMs: 20_000, message: 'old container removed' });
    const newContainer = await containerHostname(next);
    expect(newContainer).not.toBe(oldContainer);
    // Once the old container is gone, every request must reach the new one through the unchanged config.
    for (let i = 0; i < 5; i++) expect((await getThroughProxy(h, domain)).body).toBe(newContainer);
    await waitFor(() => pushes() > pushesBefore, { timeoutMs: DEBOUNCE_MS + 5_000, message: "the deploy's routing push" });
    await settled(panel, h);
    await sleep(500);

    const after = await sessionRow(panel, h.nodeId);
    expect(pushes() - pushesBefore).toBe(1);
    expect(after.reloads.total).toBe(before.reloads.total);
    expect(after.routing.desiredHash).toBe(before.routing.desiredHash);
    expect(await configFileIdentity(h)).toBe(file);
    shop = { ...shop, deploymentId: next };
  });
});

describe.skipIf(!ready)('Caddy restarted (reconcile interval 1.5 s, agent self-check off so only pushes repair)', () => {
  const INTERVAL_MS = 1_500;
  let panel: Panel;
  let h: RoutedHost;
  let domain: string;

  beforeAll(async () => {
    panel = await panelWith({ TETHER_RECONCILE_INTERVAL_MS: String(INTERVAL_MS), TETHER_ROUTING_DEBOUNCE_MS: '100' });
    h = await host(panel, 'fix', { TETHER_PROXY_CHECK_INTERVAL_MS: '0' });
    domain = `app.fix-${tag}.test`;
    await routedService(panel, h, await createTeam(panel), 'app', domain);
  });

  /**
   * Breaks Caddy, then checks that the first push to find Caddy answering
   * repaired it (pushes landing while it was down answer with an error), that
   * this happened within one push cycle, and that it was one counted reload.
   */
  async function expectRepairedByNextPush(breakCaddy: () => Promise<void>, slackMs: number, expected = { kind: 'repair-empty', reason: 'repaired: proxy was running an empty config; static config loaded' }) {
    const before = await sessionRow(panel, h.nodeId);
    const applied = recordApplied(panel, h.nodeId);
    await breakCaddy();
    const brokenAt = Date.now();
    await waitFor(async () => (await sessionRow(panel, h.nodeId)).reloads.total > before.reloads.total, {
      timeoutMs: 3 * INTERVAL_MS + slackMs + 10_000,
      message: 'repair reload',
    });
    const tookMs = Date.now() - brokenAt;
    // The answerer lives in Caddy's network namespace: a restarted or recreated Caddy answers no-upstream (503)
    // until the agent's answerer check (1 s) finds knotd gone with it and starts it in the new namespace.
    const repairedAt = Date.now();
    await waitFor(async () => (await getThroughProxy(h, domain)).status === 200, { timeoutMs: 5_000, intervalMs: 100, message: 'answerer followed Caddy' });
    console.info(`answered through the repaired Caddy ${Date.now() - repairedAt} ms after its repair reload was recorded`);
    await settled(panel, h);
    // The pushes after the repair compare and do nothing.
    await sleep(2 * INTERVAL_MS);
    applied.stop();

    const answers = applied.answers.map(({ ackedAt, ...a }) => ({ ...a, afterBreak: ackedAt >= brokenAt }));
    console.info(`repair: ${tookMs} ms after the break; answers ${JSON.stringify(answers)}`);
    const repair = answers.findIndex((a) => a.reloaded);
    expect(repair, 'an answer that reloaded').toBeGreaterThanOrEqual(0);
    // Before the repair: errors (Caddy not answering yet), or no-ops of pushes the agent had received
    // while Caddy was still whole. A push received after the break that calls Caddy fine is the bug.
    expect(answers.slice(0, repair).filter((a) => a.afterBreak && a.error === null)).toEqual([]);
    expect(answers.slice(repair + 1).every((a) => !a.reloaded && !a.changed && a.error === null)).toBe(true);
    expect(answers.length - repair).toBeGreaterThanOrEqual(2);
    expect(tookMs).toBeLessThan(1.5 * INTERVAL_MS + slackMs);
    const row = await sessionRow(panel, h.nodeId);
    expect(row.reloads.total - before.reloads.total).toBe(1);
    expect(row.routing.appliedHash).toBe(before.routing.appliedHash);
    expect((await reloadsOf(panel, h.nodeId))[0]).toMatchObject(expected);
  }

  const proxyContainer = () => `tether-proxy-${h.nodeName}`;

  it('Caddy restarted with its empty bootstrap config: repaired by the next push, one reload', async () => {
    await expectRepairedByNextPush(async () => {
      expect((await dockerApi('POST', `/containers/${proxyContainer()}/restart?t=1`)).status).toBe(204);
    }, 1_000);
  });

  it('Caddy container removed: the next push recreates it and repairs it, one reload', async () => {
    // Slack for creating the container and waiting for its admin API.
    await expectRepairedByNextPush(async () => {
      expect((await dockerApi('DELETE', `/containers/${proxyContainer()}?force=1`)).status).toBe(204);
      // The agent created a new Caddy: its first load is `initial`, which disrupts nothing.
    }, 5_000, { kind: 'initial', reason: 'static proxy config loaded (first configuration)' });
  });
});
