import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { main } from '../../src/main.js';
import { CLI_VERSION } from '../../src/version.js';

/**
 * A panel that answers fixed JSON per GET path (404 NOT_FOUND otherwise), on port 0, and the CLI run in-process
 * against it with its own config folder: for the CLI's views of what the real panel answers.
 */
export function answeringPanel(answers: Record<string, unknown>, name: string) {
  const dir = mkdtempSync(path.join(os.tmpdir(), `tether-cli-${name}-`));
  const server = createServer((req, res) => {
    const body = answers[req.url ?? ''];
    res.writeHead(body === undefined ? 404 : 200, { 'content-type': 'application/json', 'x-tether-panel-version': CLI_VERSION });
    res.end(JSON.stringify(body ?? { error: { code: 'NOT_FOUND', message: 'no' } }));
  });
  let url = '';
  return {
    async start(): Promise<void> {
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
    },
    async stop(): Promise<void> {
      await new Promise((resolve) => server.close(resolve));
      rmSync(dir, { recursive: true, force: true });
    },
    async run(argv: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
      let stdout = '';
      let stderr = '';
      const sink = (append: (s: string) => void) => new Writable({ write: (chunk, _e, done) => (append(chunk.toString()), done()) });
      const saved = { ...process.env };
      Object.assign(process.env, { TETHER_CONFIG_DIR: dir, TETHER_URL: url, TETHER_TOKEN: 'tth_op_x' });
      try {
        const code = await main(argv, { stdout: sink((s) => (stdout += s)), stderr: sink((s) => (stderr += s)) });
        return { code, stdout, stderr };
      } finally {
        process.env = saved;
      }
    },
  };
}
