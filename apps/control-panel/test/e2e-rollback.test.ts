import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { dockerApi, ensureDocker, ensureTestImage, ensureWebImage, waitFor } from '@tether/testkit';
import { startAgentProcess, type AgentProcess } from './helpers/agent-process.js';
import { runCli } from './helpers/cli-process.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';

// Rollback end to end: a real panel, a real agent process, Docker. The previous image, env and command come
// back (read with docker inspect), stay for the next plain deploy, and the refusals carry their codes. The
// CLI's rollback runs against the same panel.

const docker = await ensureDocker();

interface Inspect {
  /** The id of the image the container runs. */
  Image: string;
  Config: { Image: string; Env: string[]; Entrypoint: string[] | null; Cmd: string[] | null };
  NetworkSettings: { Networks: Record<string, { IPAddress: string }> };
}

async function imageIdOf(image: string): Promise<string> {
  const res = await dockerApi('GET', `/images/${encodeURIComponent(image)}/json`);
  return (JSON.parse(res.body) as { Id: string }).Id;
}

describe.skipIf(!docker.available)('rollback end to end', () => {
  let panel: Panel;
  let agent: AgentProcess;
  let teamId: string;
  let token: string;
  let nodeName: string;
  let imageA: string;
  let imageB: string;
  let configDir: string;
  let n = 0;

  beforeAll(async () => {
    imageA = await ensureTestImage();
    imageB = await ensureWebImage();
    panel = await startPanel({ env: { TETHER_HEARTBEAT_INTERVAL_MS: '300', TETHER_DEPLOYMENT_WATCH_MS: '50' } });
    const team = await panel.api('POST', '/v1/teams', { name: `rollback-${process.pid}` });
    teamId = team.body.id;
    token = (await panel.api('POST', `/v1/teams/${teamId}/tokens`, { name: 'cli' })).body.token;
    const node = await panel.createNode(`rollback-${process.pid}`);
    nodeName = node.name;
    agent = await startAgentProcess({
      panelUrl: panel.url,
      token: node.token,
      nodeName,
      runtime: 'docker',
      env: { TETHER_MIN_READY_MS: '300', TETHER_DRAIN_MS: '100', TETHER_STOP_TIMEOUT_MS: '1000', TETHER_START_TIMEOUT_MS: '10000', TETHER_RESTART_BUDGET: '0' },
    });
    await waitFor(() => panel.app.agentSide.registry.get(node.id), { timeoutMs: 10_000, message: 'agent session' });
    configDir = mkdtempSync(path.join(os.tmpdir(), 'tether-cli-rollback-'));
  });
  afterEach((context) => {
    if (context.task.result?.state === 'fail') console.error(agent?.process.output().slice(-5_000));
  });
  afterAll(async () => {
    await agent?.destroy();
    await panel?.close();
    if (configDir) rmSync(configDir, { recursive: true, force: true });
  });

  const serve = (message: string) => ['sh', '-c', `echo ${message} > /tmp/index.html; httpd -f -p 8080 -h /tmp & trap 'kill $!; exit 0' TERM; wait`];
  async function service(body: Record<string, unknown>) {
    const res = await panel.api('POST', '/v1/services', { teamId, name: `r${++n}`, node: nodeName, internalPort: 8080, ...body });
    expect(res.status).toBe(201);
    return res.body.id as string;
  }
  async function deploy(serviceId: string, expected = 'running') {
    const res = await panel.api('POST', `/v1/services/${serviceId}/deployments?wait=30`, {});
    expect(res.body).toMatchObject({ status: expected });
    return res.body.id as string;
  }
  async function runningInspect(serviceId: string): Promise<Inspect & { deployment: string }> {
    const filters = encodeURIComponent(JSON.stringify({ label: [`tether.service=${serviceId}`], status: ['running'] }));
    // The old container is stopped just after the new one runs (drain, then stop): wait until it is gone.
    const list = await waitFor(
      async () => {
        const rows = JSON.parse((await dockerApi('GET', `/containers/json?filters=${filters}`)).body) as { Id: string; Labels: Record<string, string> }[];
        return rows.length === 1 ? rows : undefined;
      },
      { timeoutMs: 10_000, message: `one running container of ${serviceId}` },
    );
    const info = JSON.parse((await dockerApi('GET', `/containers/${list[0]!.Id}/json`)).body) as Inspect;
    return { ...info, deployment: list[0]!.Labels['tether.deployment']! };
  }

  it('restores the previous image, env and command; the next plain deploy keeps them; runningAt and rollbackOf recorded', async () => {
    const id = await service({ image: imageA, env: { RELEASE: 'one' }, command: serve('one') });
    const first = await deploy(id);
    expect((await panel.api('PATCH', `/v1/services/${id}`, { image: imageB, env: { RELEASE: 'two' }, command: serve('two') })).status).toBe(200);
    const second = await deploy(id);
    expect((await runningInspect(id)).Config.Env).toContain('RELEASE=two');

    const started = performance.now();
    const res = await panel.api('POST', `/v1/services/${id}/rollback?wait=30`, {});
    const tookMs = Math.round(performance.now() - started);
    console.log(`rollback to ${first}: ${res.body.status} after ${tookMs} ms`);
    expect(res.status).toBe(200);
    // What release one ran, pinned by its agent: a local image's id (no registry digest).
    const pinned = (await panel.api('GET', `/v1/deployments/${first}`)).body.imageRef as string;
    expect(pinned).toBe(await imageIdOf(imageA));
    expect(res.body).toMatchObject({ status: 'running', final: true, rollbackOf: first, spec: { image: pinned, env: { RELEASE: 'one' }, command: serve('one') } });
    expect(res.body.runningAt).toEqual(expect.any(String));
    const after = await runningInspect(id);
    expect(after.deployment).toBe(res.body.id);
    expect(after.Config).toMatchObject({ Image: pinned, Entrypoint: serve('one') });
    expect(after.Config.Env).toContain('RELEASE=one');
    // The service holds the restored spec: the next plain deploy does not bring release two back.
    expect((await panel.api('GET', `/v1/services/${id}`)).body).toMatchObject({ image: pinned, env: { RELEASE: 'one' }, command: serve('one') });
    const plain = await deploy(id);
    expect((await panel.api('GET', `/v1/deployments/${plain}`)).body).toMatchObject({ rollbackOf: null, spec: { image: pinned, env: { RELEASE: 'one' }, command: serve('one') } });
    expect((await runningInspect(id)).Config.Env).toContain('RELEASE=one');
    // The superseded second deployment keeps its runningAt: it ran, so it is a target too.
    const superseded = (await panel.api('GET', `/v1/deployments/${second}`)).body;
    expect(superseded).toMatchObject({ status: 'superseded', runningAt: expect.any(String) });
    const toSecond = await panel.api('POST', `/v1/services/${id}/rollback?wait=30`, { to: second });
    expect(toSecond.body).toMatchObject({ status: 'running', rollbackOf: second, spec: { image: await imageIdOf(imageB), env: { RELEASE: 'two' } } });

    const audit = await panel.api('GET', `/v1/audit?action=deployment.rollback`);
    const rows = audit.body.items as { action: string; outcome: string; target: { type: string; id: string } }[];
    expect(rows.filter((r) => r.outcome === 'success' && r.target.type === 'deployment').map((r) => r.target.id)).toEqual(expect.arrayContaining([res.body.id, toSecond.body.id]));
  });

  it('a tag moved since the release: the rollback runs what the release ran, not what the tag names now', async () => {
    const moving = `tether-test/moving-${process.pid}`;
    const tag = async (image: string) => {
      const res = await dockerApi('POST', `/images/${encodeURIComponent(image)}/tag?repo=${encodeURIComponent(moving)}&tag=live`);
      expect(res.status).toBe(201);
    };
    try {
      await tag(imageA);
      const id = await service({ image: `${moving}:live`, command: serve('moving') });
      const first = await deploy(id);
      expect((await panel.api('GET', `/v1/deployments/${first}`)).body.imageRef).toBe(await imageIdOf(imageA));
      // The tag now names another image; release two runs it.
      await tag(imageB);
      await deploy(id);
      expect((await runningInspect(id)).Image).toBe(await imageIdOf(imageB));
      const res = await panel.api('POST', `/v1/services/${id}/rollback?wait=30`, {});
      expect(res.body).toMatchObject({ status: 'running', rollbackOf: first, spec: { image: await imageIdOf(imageA) } });
      expect((await runningInspect(id)).Image).toBe(await imageIdOf(imageA));
    } finally {
      await dockerApi('DELETE', `/images/${encodeURIComponent(`${moving}:live`)}`);
    }
  });

  it('409 NO_ROLLBACK_TARGET, 409 ROLLBACK_TARGET_NEVER_RAN, 404 for another service\'s deployment; replicas stay', async () => {
    const id = await service({ image: imageA, command: serve('solo') });
    const none = await panel.api('POST', `/v1/services/${id}/rollback`, {});
    expect({ status: none.status, code: none.body.error?.code }).toEqual({ status: 409, code: 'NO_ROLLBACK_TARGET' });
    const only = await deploy(id);
    const single = await panel.api('POST', `/v1/services/${id}/rollback`, {});
    expect({ status: single.status, code: single.body.error?.code }).toEqual({ status: 409, code: 'NO_ROLLBACK_TARGET' });

    await panel.api('PATCH', `/v1/services/${id}`, { command: ['sh', '-c', 'echo broken release >&2; exit 3'] });
    const broken = await deploy(id, 'failed');
    const never = await panel.api('POST', `/v1/services/${id}/rollback`, { to: broken });
    expect({ status: never.status, code: never.body.error?.code }).toEqual({ status: 409, code: 'ROLLBACK_TARGET_NEVER_RAN' });

    const other = await service({ image: imageA, command: serve('other') });
    const theirs = await deploy(other);
    const foreign = await panel.api('POST', `/v1/services/${id}/rollback`, { to: theirs });
    expect({ status: foreign.status, code: foreign.body.error?.code }).toEqual({ status: 404, code: 'NOT_FOUND' });
    const missing = await panel.api('POST', `/v1/services/${id}/rollback`, { to: 'no-such-deployment' });
    expect(missing.status).toBe(404);
    // Refusals change nothing: the service still holds the broken command.
    expect((await panel.api('GET', `/v1/services/${id}`)).body.command).toEqual(['sh', '-c', 'echo broken release >&2; exit 3']);

    // After the failed release, the default target is the one that ran; replicas are not part of a release.
    await panel.api('PATCH', `/v1/services/${id}`, { replicas: 2 });
    const back = await panel.api('POST', `/v1/services/${id}/rollback?wait=30`, {});
    expect(back.body).toMatchObject({ status: 'running', rollbackOf: only, spec: { replicas: 2, command: serve('solo') } });
  });

  it("a named volume's data survives redeploys and a rollback: the rolled-back release reads what both releases wrote", async () => {
    // Each start appends its release to the volume, then serves the volume's folder.
    const writeAndServe = ['sh', '-c', `echo $RELEASE >> /data/log; httpd -f -p 8080 -h /data & trap 'kill $!; exit 0' TERM; wait`];
    const id = await service({ image: imageA, env: { RELEASE: 'one' }, command: writeAndServe, volumes: [{ name: 'data', mountPath: '/data' }] });
    const first = await deploy(id);
    await panel.api('PATCH', `/v1/services/${id}`, { env: { RELEASE: 'two' } });
    await deploy(id);
    const back = await panel.api('POST', `/v1/services/${id}/rollback?wait=30`, {});
    expect(back.body).toMatchObject({ status: 'running', rollbackOf: first, spec: { env: { RELEASE: 'one' }, volumes: [{ name: 'data', mountPath: '/data' }] } });
    const running = await runningInspect(id);
    const address = Object.values(running.NetworkSettings.Networks)[0]!.IPAddress;
    const log = await waitFor(
      async () => {
        const res = await fetch(`http://${address}:8080/log`).catch(() => null);
        return res?.ok ? await res.text() : undefined;
      },
      { timeoutMs: 5_000, message: 'the volume served by the rolled-back release' },
    );
    expect(log.trim().split('\n')).toEqual(['one', 'two', 'one']);
  });

  it('tether rollback --wait against the real panel', async () => {
    const id = await service({ image: imageA, command: serve('cli-one') });
    const name = (await panel.api('GET', `/v1/services/${id}`)).body.name as string;
    const first = await deploy(id);
    await panel.api('PATCH', `/v1/services/${id}`, { command: serve('cli-two') });
    await deploy(id);
    expect((await runCli(['login', panel.url], { configDir, stdin: `${token}\n` })).code).toBe(0);
    const run = await runCli(['rollback', name, '--wait'], { configDir });
    expect(run.code).toBe(0);
    expect(run.stdout).toContain(`rolls back to the spec of deployment ${first}`);
    expect(run.stdout).toMatch(/running after \d+\.\ds/);
    expect((await runningInspect(id)).Config.Entrypoint).toEqual(serve('cli-one'));
    // Another id of the same shape (its last character changed: an id already ending in x stays itself with 'x').
    const unknown = first.slice(0, -1) + (first.endsWith('x') ? 'y' : 'x');
    const refused = await runCli(['rollback', name, '--to', unknown], { configDir });
    expect(refused.code, `${refused.stdout}\n${refused.stderr}`).toBe(4);
    expect(refused.stderr).toContain('NOT_FOUND');
  });
});
