import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CAPABILITIES, type ContainerState } from '@tether/protocol';
import { dockerApi, ensureDocker, ensureTestImage, sleep, waitFor } from '@tether/testkit';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { failureSuffix } from './helpers/deploy-answer.js';
import { RawAgent } from './helpers/raw-agent.js';
import { attachRoute, createTeam, getThroughProxy, startRoutedHost, type RoutedHost } from './helpers/routed-host.js';

// HTTP health checks end to end: a real panel, a real agent process with its own Caddy, busybox containers
// whose /cgi-bin/health is a CGI script (200 while /tmp/healthy exists, else 500), probed by the agent from
// outside the container. A 10 requests/s load through Caddy counts what customers would have seen.

const docker = await ensureDocker();

/** GET / answers "warming" until WARMUP seconds passed, then $MESSAGE; the check passes from then on unless FAIL_HEALTH. */
const APP = [
  'mkdir -p /tmp/www/cgi-bin',
  'echo warming > /tmp/www/index.html',
  `printf '#!/bin/sh\\nif [ -e /tmp/healthy ]; then printf "Status: 200 OK\\\\r\\\\nContent-Type: text/plain\\\\r\\\\n\\\\r\\\\nok\\\\n"; else printf "Status: 500 Internal Server Error\\\\r\\\\nContent-Type: text/plain\\\\r\\\\n\\\\r\\\\nnot healthy\\\\001\\\\n"; fi\\n' > /tmp/www/cgi-bin/health`,
  'chmod +x /tmp/www/cgi-bin/health',
  '{ sleep "${WARMUP:-0}"; echo "${MESSAGE:-hello}" > /tmp/www/index.html; [ -z "$FAIL_HEALTH" ] && touch /tmp/healthy; } &',
  'httpd -f -p 8080 -h /tmp/www &',
  "trap 'kill $!; exit 0' TERM",
  'wait',
].join('\n');

const CHECK = { path: '/cgi-bin/health', intervalSeconds: 1, timeoutSeconds: 1, healthyThreshold: 1, unhealthyThreshold: 2 };
const HEARTBEAT_MS = 300;

/** GETs through Caddy every 100 ms until stopped; every answer (or error) in order. */
function load(host: RoutedHost, domain: string) {
  const answers: string[] = [];
  let running = true;
  const done = (async () => {
    while (running) {
      const started = Date.now();
      try {
        const res = await getThroughProxy(host, domain);
        answers.push(res.status === 200 ? res.body : `HTTP ${res.status}`);
      } catch (err) {
        answers.push(`ERROR ${(err as Error).message}`);
      }
      await sleep(Math.max(0, 100 - (Date.now() - started)));
    }
  })();
  return {
    answers,
    async stop() {
      running = false;
      await done;
      const counts: Record<string, number> = {};
      for (const a of answers) counts[a] = (counts[a] ?? 0) + 1;
      return counts;
    },
  };
}

async function exec(containerId: string, script: string): Promise<void> {
  const created = await dockerApi('POST', `/containers/${containerId}/exec`, JSON.stringify({ Cmd: ['sh', '-c', script], AttachStdout: true, AttachStderr: true }));
  expect(created.status).toBe(201);
  const { Id } = JSON.parse(created.body) as { Id: string };
  await dockerApi('POST', `/exec/${Id}/start`, JSON.stringify({ Detach: false, Tty: true }));
}

async function runningContainers(serviceId: string): Promise<{ Id: string; Labels: Record<string, string> }[]> {
  const filters = encodeURIComponent(JSON.stringify({ label: [`tether.service=${serviceId}`], status: ['running'] }));
  return JSON.parse((await dockerApi('GET', `/containers/json?filters=${filters}`)).body) as { Id: string; Labels: Record<string, string> }[];
}

describe.skipIf(!docker.available)('HTTP health checks end to end', () => {
  let panel: Panel;
  let host: RoutedHost;
  let teamId: string;
  let image: string;
  let n = 0;

  beforeAll(async () => {
    image = await ensureTestImage();
    panel = await startPanel({ env: { TETHER_HEARTBEAT_INTERVAL_MS: String(HEARTBEAT_MS), TETHER_PING_INTERVAL_MS: '1000', TETHER_SESSION_IDLE_MS: '3000', TETHER_AGENT_IDLE_MS: '5000' } });
    teamId = await createTeam(panel);
    host = await startRoutedHost(panel, `hc-${process.pid}`, { TETHER_START_TIMEOUT_MS: '8000' });
  }, 120_000);
  afterEach(async (context) => {
    if (context.task.result?.state === 'fail') console.error(host.agent.process.output().slice(-6_000));
  });
  afterAll(async () => {
    await host?.agent.destroy();
    await panel?.close();
  });

  async function service(env: Record<string, string>, healthCheck: Record<string, unknown> = CHECK) {
    const name = `app${++n}`;
    const res = await panel.api('POST', '/v1/services', { teamId, name, image, node: host.nodeName, internalPort: 8080, command: ['sh', '-c', APP], env, healthCheck });
    expect(res.status).toBe(201);
    return res.body.id as string;
  }
  async function deployWait(serviceId: string) {
    const res = await panel.api('POST', `/v1/services/${serviceId}/deployments?wait=30`, {});
    return res.body as { id: string; status: string; reason: string };
  }
  const status = async (serviceId: string) => (await panel.api('GET', `/v1/services/${serviceId}/status`)).body as { state: string; reason: string; containers: ContainerState[] };

  it('a check that answers 500: the deployment ends failed HEALTHCHECK_FAILED with the probe, and the old version serves every request', async () => {
    const id = await service({ MESSAGE: 'v1' });
    expect((await deployWait(id)).status).toBe('running');
    const domain = `hc-fail-${process.pid}.test`;
    await attachRoute(panel, id, domain);
    await waitFor(async () => (await getThroughProxy(host, domain)).body === 'v1', { timeoutMs: 15_000, message: 'v1 served through Caddy' });

    const traffic = load(host, domain);
    await sleep(500);
    expect((await panel.api('PATCH', `/v1/services/${id}`, { env: { MESSAGE: 'v2', FAIL_HEALTH: '1' } })).status).toBe(200);
    const started = Date.now();
    const failed = await deployWait(id);
    const tookMs = Date.now() - started;
    await sleep(1_000);
    const counts = await traffic.stop();
    console.log(`failing check: deploy answered failed in ${tookMs} ms; ${traffic.answers.length} requests through Caddy: ${JSON.stringify(counts)}`);

    expect(failed.status).toBe('failed');
    // The evidence: every field of the last probe, the body sanitised (the \001 byte reads ?).
    // Managed by allocations the node that reported it follows, then where the replicas went back (docs/api.md).
    expect(failed.reason).toMatch(
      new RegExp(`^HEALTHCHECK_FAILED: health check GET :8080\\/cgi-bin\\/health failed 2 time\\(s\\) in a row; last probe at \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z, status 500, \\d+ ms, body "not healthy\\?\\?"${failureSuffix(panel, { node: host.nodeName })}$`),
    );
    // unhealthyThreshold 2 at 1 s intervals: two probes, about one second apart, then the answer.
    expect(tookMs).toBeGreaterThanOrEqual(1_000);
    expect(tookMs).toBeLessThan(8_000);
    expect(counts).toEqual({ v1: traffic.answers.length });
    expect(traffic.answers.length).toBeGreaterThanOrEqual(15);
    const left = await runningContainers(id);
    expect(left).toHaveLength(1);
    expect((await status(id)).state).toBe('running');
  });

  it('a version that warms up for 4 s takes no request before its check passes; the switch fails none', async () => {
    const id = await service({ MESSAGE: 'v1' }, { ...CHECK, startPeriodSeconds: 6 });
    expect((await deployWait(id)).status).toBe('running');
    const domain = `hc-warm-${process.pid}.test`;
    await attachRoute(panel, id, domain);
    await waitFor(async () => (await getThroughProxy(host, domain)).body === 'v1', { timeoutMs: 15_000, message: 'v1 served through Caddy' });

    const traffic = load(host, domain);
    await sleep(500);
    const [old] = await runningContainers(id);
    await panel.api('PATCH', `/v1/services/${id}`, { env: { MESSAGE: 'v2', WARMUP: '4' } });
    const started = Date.now();
    const done = await deployWait(id);
    const tookMs = Date.now() - started;
    // The old container retired: from the next request on, only v2 can answer.
    await waitFor(async () => !(await runningContainers(id)).some((c) => c.Id === old!.Id), { timeoutMs: 10_000, intervalMs: 20, message: 'the old container stopped' });
    const oldGoneAt = traffic.answers.length;
    await sleep(1_000);
    const counts = await traffic.stop();
    const firstV2 = traffic.answers.indexOf('v2');
    // The new container enters the proxy's answers (once its check passed) before the old one leaves them, so for
    // that moment both answer (the rollout's overlap): printed, not asserted.
    const overlap = traffic.answers.slice(firstV2, oldGoneAt).filter((a) => a === 'v1').length;
    console.log(`warm-up 4 s: running after ${tookMs} ms; ${traffic.answers.length} requests through Caddy: ${JSON.stringify(counts)}; v1 answers after the first v2 (overlap): ${overlap}`);
    expect(done.status).toBe('running');
    expect(tookMs).toBeGreaterThanOrEqual(4_000);
    // Never a warming answer, never an error: only the two releases.
    expect(counts.warming).toBeUndefined();
    expect(Object.keys(counts).sort()).toEqual(['v1', 'v2']);
    // v1 answered first, and no v1 once its container is gone (one request may have been in flight then).
    expect(firstV2).toBeGreaterThan(0);
    expect(traffic.answers.slice(oldGoneAt + 1).every((a) => a === 'v2')).toBe(true);
  });

  it('a running container that fails its check reads unhealthy within the bound, with the probe, and running again when it recovers', async () => {
    const id = await service({ MESSAGE: 'v1' });
    expect((await deployWait(id)).status).toBe('running');
    const [c] = await runningContainers(id);
    await waitFor(async () => (await status(id)).containers[0]?.health === 'healthy', { timeoutMs: 5_000, message: 'healthy' });

    // Bound: (unhealthyThreshold − 1) × interval + timeout + one heartbeat + 1 s.
    const bound = (CHECK.unhealthyThreshold - 1) * CHECK.intervalSeconds * 1000 + CHECK.timeoutSeconds * 1000 + HEARTBEAT_MS + 1000;
    let t0 = Date.now();
    await exec(c!.Id, 'rm /tmp/healthy');
    const sick = await waitFor(async () => {
      const s = await status(id);
      return s.containers[0]?.health === 'unhealthy' ? s : undefined;
    }, { timeoutMs: bound + 5_000, intervalMs: 50, message: 'unhealthy' });
    const toUnhealthy = Date.now() - t0;
    const gauge = async () => (await (await fetch(`${panel.url}/metrics`)).text()).match(new RegExp(`^tether_node_containers_unhealthy\\{node="${host.nodeName}"\\} (\\d+)$`, 'm'))?.[1];
    await waitFor(async () => (await gauge()) === '1', { timeoutMs: 10_000, message: '/metrics counts the unhealthy container' });
    t0 = Date.now();
    await exec(c!.Id, 'touch /tmp/healthy');
    const well = await waitFor(async () => {
      const s = await status(id);
      return s.containers[0]?.health === 'healthy' ? s : undefined;
    }, { timeoutMs: bound + 5_000, intervalMs: 50, message: 'healthy again' });
    const toHealthy = Date.now() - t0;
    console.log(`running container: unhealthy after ${toUnhealthy} ms, healthy again after ${toHealthy} ms (bound ${bound} ms)`);

    // Never faster than unhealthyThreshold failures one interval apart, never slower than the bound.
    expect(toUnhealthy).toBeGreaterThanOrEqual((CHECK.unhealthyThreshold - 1) * CHECK.intervalSeconds * 1000 - 100);
    expect(toUnhealthy).toBeLessThanOrEqual(bound);
    expect(toHealthy).toBeLessThanOrEqual((CHECK.healthyThreshold - 1) * CHECK.intervalSeconds * 1000 + CHECK.timeoutSeconds * 1000 + HEARTBEAT_MS + 1000);
    expect(sick.state).toBe('down');
    expect(sick.containers[0]).toMatchObject({ state: 'running', health: 'unhealthy', lastProbe: { status: 500, error: null, body: 'not healthy??' } });
    expect(sick.reason).toMatch(/; HEALTHCHECK_FAILED: .* is unhealthy \(last probe at .*: status 500, \d+ ms\)$/);
    expect(well.state).toBe('running');
    expect(well.containers[0]).toMatchObject({ health: 'healthy', lastProbe: { status: 200, body: 'ok?' } });
    await waitFor(async () => (await gauge()) === '0', { timeoutMs: 10_000, message: '/metrics: none unhealthy' });
  });
});

describe('health checks at the edge and for older agents', () => {
  let panel: Panel;
  let teamId: string;
  beforeAll(async () => {
    panel = await startPanel({ env: { TETHER_ACK_TIMEOUT_MS: '2000', TETHER_SESSION_IDLE_MS: '5000', TETHER_PING_INTERVAL_MS: '1000' } });
    teamId = await createTeam(panel);
  });
  afterAll(async () => panel?.close());

  it('defaults filled; without a port anywhere 400 HEALTHCHECK_NEEDS_PORT, also when a PATCH removes the port', async () => {
    const node = await panel.createNode(`hc-edge-${process.pid}`);
    const noPort = await panel.api('POST', '/v1/services', { teamId, name: 'np', image: 'tether-test/busybox:1', node: node.name, healthCheck: { path: '/health' } });
    expect({ status: noPort.status, code: noPort.body.error?.code }).toEqual({ status: 400, code: 'HEALTHCHECK_NEEDS_PORT' });
    const ok = await panel.api('POST', '/v1/services', { teamId, name: 'p', image: 'tether-test/busybox:1', node: node.name, internalPort: 8080, healthCheck: { path: '/health' } });
    expect(ok.status).toBe(201);
    expect(ok.body.healthCheck).toEqual({ path: '/health', port: null, intervalSeconds: 5, timeoutSeconds: 2, healthyThreshold: 1, unhealthyThreshold: 3, startPeriodSeconds: 0 });
    const unport = await panel.api('PATCH', `/v1/services/${ok.body.id}`, { internalPort: null });
    expect({ status: unport.status, code: unport.body.error?.code }).toEqual({ status: 400, code: 'HEALTHCHECK_NEEDS_PORT' });
    const ownPort = await panel.api('PATCH', `/v1/services/${ok.body.id}`, { healthCheck: { path: '/h', port: 9000 } });
    expect(ownPort.body.healthCheck).toMatchObject({ path: '/h', port: 9000 });
    expect((await panel.api('PATCH', `/v1/services/${ok.body.id}`, { internalPort: null })).status).toBe(200);
    const badPath = await panel.api('POST', '/v1/services', { teamId, name: 'bp', image: 'tether-test/busybox:1', node: node.name, internalPort: 80, healthCheck: { path: 'health now' } });
    expect(badPath.status).toBe(400);
    expect((await panel.api('PATCH', `/v1/services/${ok.body.id}`, { healthCheck: null })).body.healthCheck).toBeNull();
  });

  it('an agent that did not announce workload.healthCheck: the deployment ends failed AGENT_LACKS_CAPABILITY naming it, never sent', async () => {
    const node = await panel.createNode(`hc-old-${process.pid}`);
    const agent = await RawAgent.connect({ url: panel.url, token: node.token, capabilities: [CAPABILITIES.WORKLOAD_COMMAND, CAPABILITIES.WORKLOAD_RESOURCES, CAPABILITIES.WORKLOAD_VOLUMES] });
    try {
      await waitFor(() => panel.app.agentSide.registry.get(node.id), { timeoutMs: 5_000, message: 'session' });
      const svc = await panel.api('POST', '/v1/services', { teamId, name: 'old', image: 'tether-test/busybox:1', node: node.name, internalPort: 8080, healthCheck: { path: '/health' } });
      const res = await panel.api('POST', `/v1/services/${svc.body.id}/deployments`, {});
      expect({ status: res.status, code: res.body.error?.code }).toEqual({ status: 409, code: 'AGENT_LACKS_CAPABILITY' });
      const [row] = await panel.prisma.deployment.findMany({ where: { serviceId: svc.body.id } });
      expect(row).toMatchObject({ status: 'failed', reason: expect.stringMatching(/^AGENT_LACKS_CAPABILITY: .*workload\.healthCheck/) });
      expect(agent.received.some((m) => m.type === 'deploy')).toBe(false);
    } finally {
      agent.close();
    }
  });
});
