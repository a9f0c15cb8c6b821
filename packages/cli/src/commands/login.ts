import { ApiClient } from '../api-client.js';
import { saveCredentials } from '../credentials.js';
import { usage } from '../errors.js';
import { positional, type Context } from '../context.js';

// tether login <url>: the token comes from stdin when it is not a terminal
// (`echo $TOKEN | tether login …`), else from a prompt that does not echo.
// It is checked against the panel before it is stored.

export async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  let text = '';
  for await (const chunk of stream) text += chunk.toString();
  return text;
}

/** Reads a line from the terminal without echoing it (raw mode; Enter ends it, Ctrl-C cancels). */
export function promptHidden(stdin: NodeJS.ReadStream, question: string): Promise<string> {
  process.stderr.write(question);
  stdin.setRawMode(true);
  stdin.resume();
  return new Promise((resolve, reject) => {
    let value = '';
    const done = () => {
      stdin.off('data', onData);
      stdin.setRawMode(false);
      stdin.pause();
      process.stderr.write('\n');
    };
    const onData = (chunk: Buffer) => {
      for (const ch of chunk.toString('utf8')) {
        if (ch === '\r' || ch === '\n') {
          done();
          resolve(value);
          return;
        }
        if (ch === '\u0003') {
          done();
          reject(usage('cancelled'));
          return;
        }
        value = ch === '\u007f' || ch === '\b' ? value.slice(0, -1) : value + ch;
      }
    };
    stdin.on('data', onData);
  });
}

export async function login(ctx: Context, args: string[]): Promise<number> {
  const raw = positional(args, 0, 'url');
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw usage(`not a URL: ${raw}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw usage(`the panel URL must be http(s): ${raw}`);
  const token = (ctx.stdin.isTTY ? await promptHidden(ctx.stdin as NodeJS.ReadStream, 'API token: ') : await readAll(ctx.stdin)).trim();
  if (!token) throw usage('no token given (pipe it on stdin or type it at the prompt)');
  const credentials = { url: url.origin + url.pathname.replace(/\/+$/, ''), token };
  const client = new ApiClient(credentials);
  try {
    // Any authenticated read proves the token; customers and operators may both list services.
    const { body } = await client.call<unknown[]>('GET', '/v1/services');
    const file = saveCredentials(ctx.env, credentials);
    ctx.out.say(`Logged in to ${credentials.url} (${body.length} services visible); token stored in ${file}`);
    ctx.out.data({ url: credentials.url, services: body.length, stored: file });
  } finally {
    await client.close();
  }
  return 0;
}
