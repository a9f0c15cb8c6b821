import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PANEL_VERSION_HEADER } from '@tether/common';
import { EXIT } from '../src/errors.js';
import { main } from '../src/main.js';
import { CLI_VERSION } from '../src/version.js';

// tether deploy's service flags: what they PATCH before the deployment (against a recording HTTP server),
// and the usage errors they answer without calling the panel.

const requests: { method: string; url: string; body: unknown }[] = [];
const server = createServer((req: IncomingMessage, res) => {
  let raw = '';
  req.on('data', (c: Buffer) => (raw += c.toString()));
  req.on('end', () => {
    requests.push({ method: req.method!, url: req.url!, body: raw ? JSON.parse(raw) : undefined });
    res.setHeader('content-type', 'application/json');
    // A panel of this CLI's version: the CLI refuses an answer that names none.
    res.setHeader(PANEL_VERSION_HEADER, CLI_VERSION);
    if (req.method === 'GET' && req.url === '/v1/services') return res.end(JSON.stringify([{ id: 's1', name: 'web', nodeName: 'n', replicas: 1, image: 'x' }]));
    if (req.method === 'PATCH') return res.end(JSON.stringify({ id: 's1' }));
    res.statusCode = 202;
    res.end(JSON.stringify({ id: 'd1', status: 'delivered', reason: null }));
  });
});
const dir = mkdtempSync(path.join(os.tmpdir(), 'tether-cli-changes-'));
let url = '';
beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

async function run(argv: string[]) {
  const saved = { ...process.env };
  Object.assign(process.env, { TETHER_CONFIG_DIR: dir, TETHER_URL: url, TETHER_TOKEN: 'tok' });
  let err = '';
  const stderr = new Writable({ write: (c, _e, done) => ((err += c.toString()), done()) });
  const stdout = new Writable({ write: (_c, _e, done) => done() });
  try {
    requests.length = 0;
    return { code: await main(argv, { stdout, stderr }), stderr: err };
  } finally {
    process.env = saved;
  }
}

describe('tether deploy: service flags', () => {
  it('PATCHes command, args, limits and volumes in one request, then deploys', async () => {
    const argv = ['deploy', 'web', '--command', 'sh', '--command=-c', '--arg', 'exec worker', '--cpus', '0.5', '--memory', '256', '--volume', 'data:/data', '--volume', 'assets:/srv/assets:ro'];
    expect((await run(argv)).code).toBe(EXIT.OK);
    expect(requests.map((r) => `${r.method} ${r.url}`)).toEqual(['GET /v1/services', 'PATCH /v1/services/s1', 'POST /v1/services/s1/deployments']);
    expect(requests[1]!.body).toEqual({
      command: ['sh', '-c'],
      args: ['exec worker'],
      resources: { cpus: 0.5, memoryMiB: 256 },
      volumes: [
        { name: 'data', mountPath: '/data', readOnly: false },
        { name: 'assets', mountPath: '/srv/assets', readOnly: true },
      ],
    });
  });

  it('--max-surge, --max-unavailable, --progress-deadline: the service\'s rollout, the flags left out at their defaults', async () => {
    expect((await run(['deploy', 'web', '--max-surge', '2', '--progress-deadline', '120'])).code).toBe(EXIT.OK);
    expect(requests[1]).toMatchObject({ method: 'PATCH', body: { rollout: { maxSurge: 2, progressDeadlineSeconds: 120 } } });
    expect((await run(['deploy', 'web', '--max-surge', '0', '--max-unavailable', '1'])).code).toBe(EXIT.OK);
    expect(requests[1]!.body).toEqual({ rollout: { maxSurge: 0, maxUnavailable: 1 } });
  });

  it('without service flags nothing is PATCHed', async () => {
    expect((await run(['deploy', 'web'])).code).toBe(EXIT.OK);
    expect(requests.map((r) => r.method)).toEqual(['GET', 'POST']);
  });

  it.each([
    [['--cpus', 'two'], '--cpus takes'],
    [['--cpus', '0'], '--cpus takes'],
    [['--memory', '1.5'], '--memory takes'],
    [['--memory', '4'], '--memory takes'],
    [['--volume', 'data'], '--volume takes'],
    [['--volume', 'data:relative'], '--volume takes'],
    [['--volume', 'data:/x:rx'], '--volume takes'],
    [['--max-surge', '101'], '--max-surge takes'],
    [['--max-unavailable', 'one'], '--max-unavailable takes'],
    [['--progress-deadline', '0'], '--progress-deadline takes'],
    [['--progress-deadline', '1.5'], '--progress-deadline takes'],
  ])('%j: usage error (exit 2), nothing changed or deployed', async (flags, message) => {
    const result = await run(['deploy', 'web', ...flags]);
    expect(result).toMatchObject({ code: EXIT.USAGE, stderr: expect.stringContaining(message) });
    expect(requests.filter((r) => r.method !== 'GET')).toEqual([]);
  });
});
