import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { ensureDocker, freePort, repoRoot, waitFor } from '@tether/testkit';
import { AGENT_IMAGE, PANEL_IMAGE, buildImage, docker, imageSizeMb, localNodeBase } from './fixtures/images.js';

// The panel and agent images, built from the real Dockerfiles on a locally
// made Node base (nothing can be pulled here): the one-line trial of the
// panel, health checks, and SIGTERM as PID 1 (exit 0 well within the grace).

const LABEL = 'tether.test=infra-images';
const docker_ = await ensureDocker();
const created: string[] = [];

describe.skipIf(!docker_.available)('container images', () => {
  beforeAll(async () => {
    await localNodeBase();
    await buildImage('control-panel', PANEL_IMAGE);
    // The agent image takes its Caddy binary from an image; here Debian's, packaged by infra/caddy.
    const caddy = 'tether-test/caddy:ci';
    await promisify(execFile)(path.join(repoRoot, 'infra', 'caddy', 'build-image.sh'), [caddy], { timeout: 120_000 });
    await buildImage('host-agent', AGENT_IMAGE, ['--build-arg', `CADDY_IMAGE=${caddy}`]);
  }, 900_000);

  afterAll(async () => {
    for (const name of created) await docker(['rm', '-f', '-v', name]).catch(() => undefined);
  });

  it('the panel image is small enough and labelled', async () => {
    expect(await imageSizeMb(PANEL_IMAGE)).toBeLessThan(300);
    const labels = JSON.parse(await docker(['image', 'inspect', '-f', '{{json .Config.Labels}}', PANEL_IMAGE])) as Record<string, string>;
    expect(labels['org.opencontainers.image.title']).toBe('Tether control panel');
    expect(await docker(['image', 'inspect', '-f', '{{.Config.User}}', PANEL_IMAGE])).toBe('tether');
  });

  it('runs the panel on its embedded PostgreSQL as a named user, healthy, and stops with 0 on SIGTERM', async () => {
    const port = await freePort();
    const name = `tether-infra-panel-${process.pid}`;
    created.push(name);
    const started = Date.now();
    await docker(['run', '-d', '--name', name, '--label', LABEL, '-p', `127.0.0.1:${port}:8080`, '--health-interval', '1s', PANEL_IMAGE]);
    await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200, { timeoutMs: 30_000, intervalMs: 100 });
    const readyMs = Date.now() - started;
    expect(readyMs).toBeLessThan(15_000);
    expect(await docker(['exec', name, 'id', '-un'])).toBe('tether');
    await waitFor(async () => (await docker(['inspect', '-f', '{{.State.Health.Status}}', name])) === 'healthy', { timeoutMs: 20_000, intervalMs: 250 });
    const stopAt = Date.now();
    await docker(['stop', '-t', '10', name]);
    const stopMs = Date.now() - stopAt;
    expect(await docker(['inspect', '-f', '{{.State.ExitCode}}', name])).toBe('0');
    // Exit 0 on its own, not by the SIGKILL that follows the 10 s grace.
    expect(stopMs).toBeLessThan(9_000);
    expect(await docker(['logs', name])).toMatch(/Embedded PostgreSQL: data in \/var\/lib\/tether\/postgres/);
  });

  it('the agent image carries Caddy and a health check on its health file', async () => {
    expect(await docker(['run', '--rm', '--entrypoint', 'ls', AGENT_IMAGE, '/usr/bin/caddy'])).toBe('/usr/bin/caddy');
    const health = JSON.parse(await docker(['image', 'inspect', '-f', '{{json .Config.Healthcheck}}', AGENT_IMAGE])) as { Test: string[] };
    expect(health.Test).toEqual(['CMD', 'node', 'dist/healthcheck.js']);
    // Without a running agent there is no fresh health file: the check must fail.
    await expect(docker(['run', '--rm', AGENT_IMAGE, 'node', 'dist/healthcheck.js'])).rejects.toMatchObject({ code: 1, stdout: expect.stringMatching(/no readable health.json/) });
  });
});
