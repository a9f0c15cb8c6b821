import { mkdtempSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ensureDocker, ensureWebImage, waitFor } from '@tether/testkit';
import { startAgentProcess, type AgentProcess } from './helpers/agent-process.js';
import { runCli } from './helpers/cli-process.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { acceptedState, allocationsOn } from './helpers/deploy-answer.js';

// The `tether` CLI end to end: the real binary → the panel's REST API → the
// session → a real agent process → Docker. Exit codes and output are what a
// user (or a script) sees.

const docker = await ensureDocker();
/** The agent holds a new container this long before calling it running, so a 1 s --timeout ends first. */
const MIN_READY_MS = 2_000;

describe.skipIf(!docker.available)('tether CLI end to end', () => {
  let panel: Panel;
  let agent: AgentProcess;
  let configDir: string;
  let customerToken: string;
  let image: string;
  const name = `cli-${process.pid}`;

  beforeAll(async () => {
    image = await ensureWebImage();
    panel = await startPanel({ env: { TETHER_HEARTBEAT_INTERVAL_MS: '300', TETHER_DEPLOYMENT_WATCH_MS: '50' } });
    const team = await panel.api('POST', '/v1/teams', { name });
    const token = await panel.api('POST', `/v1/teams/${team.body.id}/tokens`, { name: 'cli' });
    customerToken = token.body.token;
    const node = await panel.createNode(name);
    agent = await startAgentProcess({
      panelUrl: panel.url,
      token: node.token,
      nodeName: node.name,
      runtime: 'docker',
      env: { TETHER_MIN_READY_MS: String(MIN_READY_MS), TETHER_IMAGE_PULL_TIMEOUT_MS: '2000', TETHER_DRAIN_MS: '100', TETHER_STOP_TIMEOUT_MS: '2000' },
    });
    await waitFor(() => panel.app.agentSide.registry.get(node.id), { timeoutMs: 10_000, message: 'agent session' });
    const service = await panel.api('POST', '/v1/services', { name: 'web', image, internalPort: 8080, node: node.name }, customerToken);
    expect(service.status).toBe(201);
    configDir = mkdtempSync(path.join(os.tmpdir(), 'tether-cli-'));
  });
  afterEach((context) => {
    if (context.task.result?.state === 'fail') console.error(`--- agent output:\n${agent?.process.output().slice(-4_000)}`);
  });
  afterAll(async () => {
    await agent?.destroy();
    await panel?.close();
    if (configDir) rmSync(configDir, { recursive: true, force: true });
  });

  const cli = (...args: string[]) => runCli(args, { configDir });

  it('login reads the token from stdin, checks it, and stores it mode 0600; a wrong token is exit 4 and stores nothing new', async () => {
    const bad = await runCli(['login', panel.url], { configDir, stdin: 'tth_cu_wrong\n' });
    expect(bad.code).toBe(4);
    expect(bad.stderr).toContain('UNAUTHORIZED');
    const ok = await runCli(['login', panel.url], { configDir, stdin: `${customerToken}\n` });
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain(`Logged in to ${panel.url}`);
    const file = path.join(configDir, 'credentials.json');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const services = await cli('services', '--json');
    expect(services.code).toBe(0);
    expect(JSON.parse(services.stdout)).toEqual([expect.objectContaining({ name: 'web', image })]);
  });

  it('deploy --wait on a good image prints each state and exits 0 once running', async () => {
    const run = await cli('deploy', 'web', '--wait');
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    // delivered on the single-node path; pending (handed to the scheduler) when managed by allocations (docs/api.md).
    expect(run.stdout).toMatch(new RegExp(`^deployment \\S+ of web: ${acceptedState(panel)}$`, 'm'));
    expect(run.stdout).toMatch(/^ +\d+\.\ds {2}running: .+$/m);
    expect(run.stdout).toMatch(/^deployment \S+ running after \d+\.\ds/m);
    // Not before the agent's readiness hold, and not much after it.
    expect(run.ms).toBeGreaterThanOrEqual(MIN_READY_MS);
    expect(run.ms).toBeLessThan(MIN_READY_MS + 8_000);
  });

  it('deploy --wait of an image that does not exist exits 1 with the reason; --json prints the final deployment', async () => {
    const run = await cli('deploy', 'web', '--image', 'tether-test/does-not-exist:1', '--wait', '--json');
    expect(run.code).toBe(1);
    const final = JSON.parse(run.stdout.trim().split('\n').at(-1)!);
    // Offline (here, CI) Docker Hub does not resolve: REGISTRY_UNREACHABLE; online it answers "pull access denied": REGISTRY_AUTH_FAILED.
    expect(final).toMatchObject({ status: 'failed', final: true, reason: expect.stringMatching(/^(REGISTRY_UNREACHABLE|REGISTRY_AUTH_FAILED): registry docker\.io /) });
    expect(run.stderr).toMatch(/failed after .*(REGISTRY_UNREACHABLE|REGISTRY_AUTH_FAILED)/);
  });

  it('deploy --wait --timeout 1 exits 5 while the deployment is not final yet, and says it goes on', async () => {
    expect((await cli('deploy', 'web', '--image', image)).code).toBe(0);
    const run = await cli('deploy', 'web', '--wait', '--timeout', '1');
    expect(run.code).toBe(5);
    expect(run.stderr).toMatch(new RegExp(`--timeout 1s ended before deployment \\S+ was final: it is ${acceptedState(panel)} and goes on`));
    expect(run.ms).toBeGreaterThanOrEqual(1_000);
  });

  it('usage errors exit 2; an unknown service exits 4; a node without a session exits 3 (NODE_UNREACHABLE)', async () => {
    expect((await cli('deploy')).code).toBe(2);
    expect((await cli('deploy', 'web', '--bogus')).code).toBe(2);
    expect((await cli('deploy', 'web', '--timeout', 'soon', '--wait')).code).toBe(2);
    const missing = await cli('deploy', 'nope');
    expect(missing.code).toBe(4);
    expect(missing.stderr).toContain('NOT_FOUND');
    const lonely = await panel.createNode(`${name}-offline`);
    expect((await panel.api('POST', '/v1/services', { name: 'stranded', image, node: lonely.name }, customerToken)).status).toBe(201);
    const unreachable = await cli('deploy', 'stranded', '--wait');
    expect(unreachable.code).toBe(3);
    expect(unreachable.stderr).toContain('NODE_UNREACHABLE');
  });
  it('status shows the service running with its evidence; routes add, list and rm', async () => {
    const all = await cli('status');
    expect(all.code).toBe(0);
    expect(all.stdout).toMatch(/^NAME +STATE +REPLICAS +NODE +ROUTES +REASON$/m);
    // A rollout of an earlier test may still hold the old container beside the new one (2/1). No routes yet: "-".
    // Managed by allocations the reason counts its allocations (docs/api.md); a replica whose rollout is under way counts while its container serves.
    const counted = allocationsOn(panel) ? '\\d\\/1 running across 1 node\\(s\\) by their allocations' : '\\d\\/1 running, reported by session ses_\\S+';
    expect(all.stdout).toMatch(new RegExp(`^web +running +\\d\\/1 +cli-\\d+ +- +${counted}$`, 'm'));
    expect(all.stdout).toMatch(/^stranded +unknown +\?\/1 +cli-\d+-offline +- +node cli-\d+-offline has not connected yet$/m);
    const one = await cli('status', 'web', '--json');
    expect(JSON.parse(one.stdout)).toMatchObject({ name: 'web', state: 'running', evidence: { sessionId: expect.stringMatching(/^ses_/) } });
    const added = await cli('routes', 'add', `cli-${process.pid}.example.com`, 'web');
    expect(added.code).toBe(0);
    expect(added.stdout).toMatch(new RegExp(`^route cli-${process.pid}\\.example\\.com → web \\(\\S+\\)$`, 'm'));
    // The route in the service's status: counted in ROUTES (serving once its probe says so).
    expect((await cli('status')).stdout).toMatch(/^web +running +\d\/1 +cli-\d+ +[01]\/1 serving +/m);
    expect((await cli('routes')).stdout).toMatch(/^DOMAIN +PATH +SERVICE +HEALTH +CERTIFICATE +ID$/m);
    const listed = await cli('routes', '--json');
    expect(JSON.parse(listed.stdout)).toEqual([expect.objectContaining({ domain: `cli-${process.pid}.example.com` })]);
    const taken = await cli('routes', 'add', `cli-${process.pid}.example.com`, 'web');
    expect(taken.code).toBe(4);
    expect(taken.stderr).toContain('DOMAIN_TAKEN');
    expect((await cli('routes', 'rm', `cli-${process.pid}.example.com`)).code).toBe(0);
    expect((await cli('routes', 'rm', `cli-${process.pid}.example.com`)).code).toBe(2);

    // The audit trail of what this customer just did to routes, newest first (refusals arrive through the outbox).
    await panel.settled();
    const trail = await cli('audit', '--target', 'route', '--since', '10m');
    expect(trail.code).toBe(0);
    expect(trail.stdout).toMatch(/^AT +ACTOR +ACTION +TARGET +OUTCOME +FROM$/m);
    expect(trail.stdout.split('\n').filter((l) => / route\.(create|delete) /.test(l)).map((l) => / (route\.\w+) .* (success|refused(?: \w+)?) /.exec(l)?.slice(1).join(' '))).toEqual([
      'route.delete success',
      'route.create refused DOMAIN_TAKEN',
      'route.create success',
    ]);
    const refused = await cli('audit', '--outcome', 'refused', '--tail', '1', '--json');
    expect(JSON.parse(refused.stdout)).toEqual({ items: [expect.objectContaining({ action: 'route.create', code: 'DOMAIN_TAKEN', actor: expect.objectContaining({ kind: 'customer' }) })] });
    expect((await cli('audit', '--since', 'yesterday-ish')).code).toBe(2);
  });
});
