import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { lines, serverSentEvents } from '../src/api-client.js';
import { loadCredentials, saveCredentials } from '../src/credentials.js';
import { readCliEnv } from '../src/env.js';
import { CLI_ERRORS, EXIT } from '../src/errors.js';
import { main } from '../src/main.js';
import { CLI_VERSION } from '../src/version.js';

// The CLI's own parts: argument errors, exit codes, the stored credentials,
// and the stream parsers. The end-to-end runs (real panel, agent, Docker) are
// in apps/control-panel/test/e2e-cli.test.ts.

const sink = () => {
  let text = '';
  const stream = new Writable({
    write(chunk, _enc, done) {
      text += chunk.toString();
      done();
    },
  });
  return { stream, text: () => text };
};

const dir = mkdtempSync(path.join(os.tmpdir(), 'tether-cli-unit-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function run(argv: string[], env: Record<string, string> = {}) {
  const saved = { ...process.env };
  Object.assign(process.env, { TETHER_CONFIG_DIR: dir, TETHER_URL: '', TETHER_TOKEN: '' }, env);
  const out = sink();
  const err = sink();
  try {
    const code = await main(argv, { stdout: out.stream, stderr: err.stream });
    return { code, stdout: out.text(), stderr: err.text() };
  } finally {
    process.env = saved;
  }
}

describe('tether CLI', () => {
  it('usage: no command, an unknown command or option, a missing argument → exit 2 with help', async () => {
    expect((await run([])).code).toBe(EXIT.USAGE);
    expect(await run(['nope'])).toMatchObject({ code: 2, stderr: expect.stringContaining('unknown command nope') });
    expect(await run(['services', '--nope'])).toMatchObject({ code: 2, stderr: expect.stringContaining("Unknown option '--nope'") });
    expect(await run(['deploy'], { TETHER_URL: 'http://127.0.0.1:1', TETHER_TOKEN: 'x' })).toMatchObject({ code: 2, stderr: 'tether: missing <service>\n' });
    expect(await run(['login', 'ftp://x'])).toMatchObject({ code: 2 });
    expect(await run(['--help'])).toMatchObject({ code: 0, stdout: expect.stringContaining('exit codes: 0 ok') });
  });

  it('not logged in, or a panel that does not answer → exit 4 with a coded error (--json prints it too)', async () => {
    expect(await run(['services'])).toMatchObject({ code: 4, stderr: expect.stringContaining('not logged in') });
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as { port: number }).port;
    await new Promise((resolve) => closed.close(resolve));
    const down = await run(['services', '--json'], { TETHER_URL: `http://127.0.0.1:${port}`, TETHER_TOKEN: 'tth_cu_x' });
    expect(down.code).toBe(4);
    expect(JSON.parse(down.stdout)).toEqual({ error: { code: 'PANEL_UNREACHABLE', message: expect.stringContaining('cannot reach the panel') } });
  });

  it("refuses a panel whose version does not fit, and a server that names none, saying both versions and where the panel's CLI is", async () => {
    // A real panel is always this CLI's version: the other versions come from a server that says it is one.
    let version: string | undefined;
    let asked = 0;
    const server = createHttpServer((req, res) => {
      asked += 1;
      res.writeHead(200, { 'content-type': 'application/json', ...(version ? { 'x-tether-panel-version': version } : {}) });
      res.end('[]');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    const env = { TETHER_URL: url, TETHER_TOKEN: 'tth_cu_x' };
    try {
      version = '0.2.0';
      const newer = await run(['services', '--json'], env);
      expect(newer.code).toBe(EXIT.API_ERROR);
      expect(JSON.parse(newer.stdout)).toMatchObject({ error: { code: 'VERSION_MISMATCH' } });
      expect(newer.stderr).toBe(
        `tether: this tether CLI is version ${CLI_VERSION} and the panel at ${url} is version 0.2.0: they do not fit (this CLI works with panels 0.1.x); ` +
          `install the panel's own CLI: npm install -g ${url}/cli/tether-cli.tgz\n`,
      );
      version = undefined;
      const none = await run(['services'], env);
      expect(none.code).toBe(EXIT.API_ERROR);
      expect(none.stderr).toMatch(/does not say its Tether version \(no x-tether-panel-version header\)/);
      version = '0.1.9';
      expect(await run(['services'], env)).toMatchObject({ code: 0, stderr: '' });
      expect(asked).toBe(3);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('its version is the package version', () => {
    expect(CLI_VERSION).toBe(JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')).version);
  });

  it('every error code has a documented exit code', () => {
    const doc = readFileSync(new URL('../../../docs/cli.md', import.meta.url), 'utf8');
    for (const [code, { exit }] of Object.entries(CLI_ERRORS)) {
      expect(doc).toContain(`| \`${code}\` | ${exit} |`);
    }
  });

  it('credentials are stored mode 0600 in a 0700 folder; TETHER_URL/TETHER_TOKEN override them', () => {
    const env = readCliEnv({ TETHER_CONFIG_DIR: path.join(dir, 'nested') });
    saveCredentials(env, { url: 'http://panel', token: 'tth_cu_1' });
    expect(statSync(path.join(dir, 'nested', 'credentials.json')).mode & 0o777).toBe(0o600);
    expect(statSync(path.join(dir, 'nested')).mode & 0o777).toBe(0o700);
    expect(loadCredentials(env)).toEqual({ url: 'http://panel', token: 'tth_cu_1' });
    expect(loadCredentials({ ...env, token: 'tth_cu_2' })).toEqual({ url: 'http://panel', token: 'tth_cu_2' });
    expect(readCliEnv({ XDG_CONFIG_HOME: '/x' }).configDir).toBe('/x/tether');
  });

  it('splits streamed lines across chunk boundaries (multi-byte characters too) and parses server-sent events', async () => {
    const chunks = async function* (parts: (string | Buffer)[]) {
      yield* parts;
    };
    const euro = Buffer.from('€');
    const got: string[] = [];
    for await (const line of lines(chunks(['a', 'b\r\nc', Buffer.concat([Buffer.from('\n'), euro.subarray(0, 1)]), euro.subarray(1), '\nlast']))) got.push(line);
    expect(got).toEqual(['ab', 'c', '€', 'last']);
    const events = [];
    for await (const e of serverSentEvents(chunks([': keep-alive\n\n', 'event: deployment\nid: 1\ndata: {"a":', '1}\n\n', 'data: x\ndata: y\n\n']))) events.push(e);
    expect(events).toEqual([
      { event: 'deployment', data: '{"a":1}' },
      { event: 'message', data: 'x\ny' },
    ]);
  });
});
