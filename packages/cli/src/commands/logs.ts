import { lines } from '../api-client.js';
import { resolveService, positional, type Context } from '../context.js';
import { CliError, EXIT, usage } from '../errors.js';

// tether logs <service> [-f] [--tail N] [--since T]: the service's container
// output through GET /v1/services/:id/logs (NDJSON). Ctrl-C ends a follow
// cleanly (exit 0). A stream the panel ends with a reason says it on stderr.

interface LogLine {
  type: 'log';
  replica: string;
  stream: 'stdout' | 'stderr';
  time: string;
  text: string;
}
interface NoticeLine {
  type: 'notice';
  code: string;
  reason: string;
}
interface EndLine {
  type: 'end';
  code: string;
  reason: string;
}

export interface LogsOptions {
  follow?: boolean;
  tail?: string;
  since?: string;
  timestamps?: boolean;
}

export async function logs(ctx: Context, args: string[], options: LogsOptions): Promise<number> {
  const ref = positional(args, 0, 'service');
  const query = new URLSearchParams();
  if (options.tail !== undefined) {
    if (!/^\d+$/.test(options.tail)) throw usage('--tail takes a number of lines');
    query.set('tail', options.tail);
  }
  if (options.since !== undefined) query.set('since', options.since);
  if (options.follow) query.set('follow', '1');
  const client = ctx.client();
  const service = await resolveService(client, ref);
  let end: EndLine | null = null;
  try {
    const res = await client.stream(`/v1/services/${service.id}/logs?${query}`, 'application/x-ndjson', ctx.signal);
    for await (const raw of lines(res.body)) {
      if (!raw) continue;
      const line = JSON.parse(raw) as LogLine | NoticeLine | EndLine;
      if (line.type === 'end') {
        end = line;
        break;
      }
      if (line.type === 'notice') {
        ctx.out.warn(`(${line.code}: ${line.reason})`);
        continue;
      }
      if (ctx.out.json) {
        ctx.out.data(line);
        continue;
      }
      const prefix = `${options.timestamps ? `${line.time} ` : ''}${line.replica}${line.stream === 'stderr' ? ' (stderr)' : ''} |`;
      // A line's text keeps its own newlines only when the container wrote a partial line; print it as one.
      ctx.out.say(`${prefix} ${line.text}`);
    }
  } catch (err) {
    if (ctx.signal.aborted) return EXIT.OK;
    throw err;
  }
  if (ctx.signal.aborted) return EXIT.OK;
  if (end === null) {
    if (options.follow) throw new CliError('STREAM_LOST', 'the log stream ended without saying why');
    return EXIT.OK;
  }
  if (end.code === 'END_OF_LOGS') return EXIT.OK;
  ctx.out.data(end);
  ctx.out.warn(`log stream ended: ${end.code}: ${end.reason}`);
  return end.code === 'NODE_UNREACHABLE' || end.code === 'SESSION_ENDED' ? EXIT.NODE_UNREACHABLE : EXIT.API_ERROR;
}
