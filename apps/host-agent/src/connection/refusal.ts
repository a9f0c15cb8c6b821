import type { IncomingMessage } from 'node:http';

// The body of a refused upgrade (`{ "error": { "code", "message" } }`, the
// panel's API shape): its code, read within a small bound of bytes and time,
// or undefined when it is not there (an older panel, a proxy in between).

const MAX_BYTES = 8 * 1024;
const MAX_WAIT_MS = 2_000;

export function refusalCode(res: IncomingMessage): Promise<string | undefined> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (code: string | undefined) => {
      clearTimeout(timer);
      res.removeAllListeners('data');
      res.resume();
      resolve(code);
    };
    const timer = setTimeout(() => done(undefined), MAX_WAIT_MS);
    timer.unref();
    res.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BYTES) return done(undefined);
      chunks.push(chunk);
    });
    res.on('error', () => done(undefined));
    res.on('end', () => {
      try {
        const code = (JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error?: { code?: unknown } }).error?.code;
        done(typeof code === 'string' ? code : undefined);
      } catch {
        done(undefined);
      }
    });
  });
}
