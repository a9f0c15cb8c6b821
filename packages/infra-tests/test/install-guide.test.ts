import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort, repoRoot, waitFor } from '@tether/testkit';
import { COMPOSE_FILE } from './fixtures/compose.js';
import { type TestImages, buildArgs, docker, testImages } from './fixtures/images.js';
import { ensureInfraTools } from './fixtures/tools.js';

// docs/install.md, run as written: every `sh` block in order (except those
// the guide marks "not run by the test"), each in its own bash with
// `set -euo pipefail`, in a copy of this working tree, with only the
// overrides the guide itself documents (TETHER_BUILD_ARGS for the offline
// build, compose settings from the environment). The guide cannot rot.

const execFileAsync = promisify(execFile);
const tools = await ensureInfraTools({ compose: true });
const GUIDE = path.join(repoRoot, 'docs', 'install.md');

interface Block {
  heading: string;
  script: string;
}

/** The guide's runnable blocks: ```sh fences not preceded by a "not run by the test" comment. */
function runnableBlocks(markdown: string): Block[] {
  const blocks: Block[] = [];
  let heading = '';
  const lines = markdown.split('\n');
  for (let i = 0; i < lines.length; i += 1) {
    const line = lines[i]!;
    if (line.startsWith('#')) heading = line.replace(/^#+\s*/, '');
    if (line.trim() !== '```sh') continue;
    const end = lines.indexOf('```', i + 1);
    if (end < 0) throw new Error(`unterminated sh block at line ${i + 1} of docs/install.md`);
    const skipped = /not run by the test/.test(lines[i - 1] ?? '');
    if (!skipped) blocks.push({ heading, script: lines.slice(i + 1, end).join('\n') });
    i = end;
  }
  return blocks;
}

let images: TestImages;
let dir = '';
let checkout = '';
const id = `${process.pid}${Date.now().toString(36).slice(-4)}`;
const project = `tetherdoc${id}`;
const nodeName = `doc-${id}`;
const network = `tether-doc-${id}`;
let env: Record<string, string> = {};

async function runBlock(block: Block, timeoutMs = 300_000): Promise<string> {
  try {
    const { stdout, stderr } = await execFileAsync('bash', ['-euo', 'pipefail', '-c', block.script], { cwd: checkout, env, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 });
    return `${stdout}${stderr}`;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`docs/install.md, block under "${block.heading}" failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}\n--- block ---\n${block.script}`);
  }
}

async function cleanUp(): Promise<void> {
  if (!checkout) return;
  if (existsSync(path.join(checkout, 'infra', 'compose', '.env'))) {
    await execFileAsync('docker-compose', ['-f', 'infra/compose/docker-compose.yml', 'down', '-v', '--timeout', '5'], { cwd: checkout, env, timeout: 120_000 }).catch(() => undefined);
  }
  const ids = (await docker(['ps', '-aq', '--filter', `label=tether.node=${nodeName}`, '--filter', `label=com.docker.compose.project=${project}`]).catch(() => '')).split('\n').filter(Boolean);
  const more = (await docker(['ps', '-aq', '--filter', `label=tether.node=${nodeName}`]).catch(() => '')).split('\n').filter(Boolean);
  if (ids.length + more.length > 0) await docker(['rm', '-f', '-v', ...new Set([...ids, ...more])]).catch(() => undefined);
  await docker(['network', 'rm', network]).catch(() => undefined);
}

describe.skipIf(!tools.available)('docs/install.md, run as written', () => {
  const blocks = runnableBlocks(readFileSync(GUIDE, 'utf8'));

  beforeAll(async () => {
    images = await testImages();
    dir = await mkdtemp(path.join(os.tmpdir(), 'tether-doc-'));
    await chmod(dir, 0o755);
    checkout = path.join(dir, 'tether');
    await mkdir(checkout);
    // This working tree as a clone would have it (tracked and untracked files, .gitignore honoured, edits included).
    await execFileAsync('bash', ['-c', `git ls-files -co --exclude-standard -z | tar --null --ignore-failed-read -T - -cf - | tar -C "${checkout}" -xf -`], { cwd: repoRoot, timeout: 120_000, maxBuffer: 16 * 1024 * 1024 });
    env = {
      // Debian's docker client first: it builds with DOCKER_BUILDKIT=1 alone (a newer client needs buildx).
      PATH: `/usr/bin:/bin:/usr/sbin:/sbin:${process.env.PATH ?? ''}`,
      HOME: process.env.HOME ?? '/root',
      TETHER_BUILD_ARGS: [...buildArgs(images.base), '--build-arg', `CADDY_IMAGE=${images.caddy}`, '--build-arg', `ANSWERER_IMAGE=${images.answerer}`].join(' '),
      COMPOSE_PROJECT_NAME: project,
      TETHER_PANEL_BIND: '127.0.0.1',
      TETHER_PANEL_PORT: String(await freePort()),
      TETHER_PROXY_BIND_ADDRESS: '127.0.0.1',
      TETHER_PROXY_HTTP_PORT: String(await freePort()),
      TETHER_PROXY_HTTPS_PORT: String(await freePort()),
      TETHER_PROXY_TLS: 'off',
      TETHER_NODE_NAME: nodeName,
      TETHER_AGENT_STATE_DIR: path.join(dir, 'agent-state'),
      TETHER_DOCKER_NETWORK: network,
      TETHER_POSTGRES_IMAGE: images.postgres,
      TETHER_CADDY_IMAGE: images.caddy,
    };
  }, 900_000);

  afterAll(async () => {
    await cleanUp();
    if (dir) await rm(dir, { recursive: true, force: true });
  }, 120_000);

  it('has the blocks this test expects, each naming the shipped compose file', () => {
    expect(blocks.map((b) => b.heading)).toEqual([
      '1. Get the source and build the images',
      '2. Configure and start PostgreSQL and the panel',
      '3. Register this host as a node and start its agent',
      '3. Register this host as a node and start its agent',
      'Backups',
      'Uninstall',
    ]);
    expect(blocks[0]!.script.split('\n')[0]).toMatch(/^git clone \S+ tether && cd tether$/);
    expect(path.relative(repoRoot, COMPOSE_FILE)).toBe('infra/compose/docker-compose.yml');
  });

  it('every runnable block succeeds, and does what the guide says', async () => {
    const [build, start, register, check, backup, uninstall] = blocks as [Block, Block, Block, Block, Block, Block];
    const tags = ['tether/control-panel:latest', 'tether/host-agent:latest'];
    const previous = await Promise.all(tags.map((tag) => docker(['image', 'inspect', '-f', '{{.Id}}', tag]).catch(() => '')));
    // The clone is this test's copy of the working tree.
    await runBlock({ ...build, script: build.script.split('\n').slice(1).join('\n') }, 900_000);
    for (const [i, tag] of tags.entries()) {
      const now = await docker(['image', 'inspect', '-f', '{{.Id}}', tag]);
      expect(now).toMatch(/^sha256:/);
      // The image the guide's tag pointed at before, now untagged (no -f: kept while tagged elsewhere or in use).
      if (previous[i] && previous[i] !== now) await docker(['rmi', previous[i]!]).catch(() => undefined);
    }

    await runBlock(start);
    const dotenv = await readFile(path.join(checkout, 'infra', 'compose', '.env'), 'utf8');
    expect(dotenv).toMatch(/^TETHER_ADMIN_TOKEN=tth_op_[A-Za-z0-9]{43}$/m);
    expect((await fetch(`http://127.0.0.1:${env.TETHER_PANEL_PORT}/readyz`)).status).toBe(200);

    await runBlock(register);
    expect(await readFile(path.join(checkout, 'infra', 'compose', '.env'), 'utf8')).toMatch(/^TETHER_NODE_TOKEN=tth_node_\S+$/m);
    expect(existsSync(path.join(checkout, 'node.json'))).toBe(false);
    const sessions = await waitFor(
      async () => {
        const out = await runBlock(check);
        return out.includes(`"nodeName":"${nodeName}"`) && /"state":"connected"/.test(out) ? out : undefined;
      },
      { timeoutMs: 60_000, intervalMs: 1_000 },
    );
    expect(sessions).toMatch(/"sessionId":"[^"]+"/);
    // The agent runs its Caddy, as the guide says.
    await waitFor(async () => (await docker(['ps', '-q', '--filter', `label=tether.node=${nodeName}`, '--filter', 'label=tether.role=proxy'])) !== '', { timeoutMs: 30_000, intervalMs: 500 });

    await runBlock(backup);
    const dump = await readFile(path.join(checkout, 'tether-backup.sql'), 'utf8');
    expect(dump).toMatch(/PostgreSQL database dump complete/);
    expect(dump).toMatch(/CREATE TABLE public\."?\w+/);

    await runBlock(uninstall);
    expect(await docker(['ps', '-aq', '--filter', `label=tether.node=${nodeName}`])).toBe('');
    expect(await docker(['ps', '-aq', '--filter', `label=com.docker.compose.project=${project}`])).toBe('');
    expect(await docker(['volume', 'ls', '-q', '--filter', `label=com.docker.compose.project=${project}`])).toBe('');
    await expect(docker(['network', 'inspect', network])).rejects.toThrow();
    expect(existsSync(env.TETHER_AGENT_STATE_DIR!)).toBe(false);
  }, 1_200_000);
});
