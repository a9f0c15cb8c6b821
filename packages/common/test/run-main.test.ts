import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const fixture = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'service.mjs');

function run(env: Record<string, string>, signal?: NodeJS.Signals, again?: NodeJS.Signals) {
  return new Promise<{ code: number | null; out: string }>((resolve) => {
    const child = spawn(process.execPath, [fixture], { env: { PATH: process.env.PATH, ...env } });
    let out = '';
    let signalled = false;
    const collect = (c: Buffer) => {
      out += c.toString();
      if (signal && !signalled && out.includes('started')) {
        signalled = true;
        child.kill(signal);
        // A second signal while it stops (as a launcher forwards a Ctrl-C the terminal sent too).
        if (again) setTimeout(() => child.kill(again), 100);
      }
    };
    child.stdout.on('data', collect);
    child.stderr.on('data', collect);
    child.on('exit', (code, sig) => resolve({ code, out: out + (sig ? ` [signal ${sig}]` : '') }));
  });
}

describe('runMain', () => {
  it('exits 2 naming every problem of a bad configuration', async () => {
    const { code, out } = await run({ BAD: '1' });
    expect(code).toBe(2);
    expect(out).toContain('PORT="x": expected a whole number');
  });

  it('exits 1 when starting fails', async () => {
    const { code, out } = await run({ CRASH: '1' });
    expect(code).toBe(1);
    expect(out).toContain('cannot start');
  });

  it.each(['SIGTERM', 'SIGINT'] as const)('stops once and exits 0 on %s', async (signal) => {
    const { code, out } = await run({}, signal);
    expect(out).toContain(`stopped on ${signal}`);
    expect(code).toBe(0);
  });

  it('a second signal while it stops does not cut the stop short', async () => {
    const { code, out } = await run({ STOP_MS: '600' }, 'SIGINT', 'SIGINT');
    expect(out).toContain('stopped on SIGINT');
    expect(out).not.toContain('[signal');
    expect(code).toBe(0);
  });
});
