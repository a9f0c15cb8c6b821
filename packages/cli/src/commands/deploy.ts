import { serverSentEvents } from '../api-client.js';
import { resolveService, positional, type Context } from '../context.js';
import { CliError, EXIT, usage } from '../errors.js';
import { describeChanges, serviceChanges, type ServiceChangeOptions } from './service-changes.js';

// tether deploy <service> [--image IMG] [--command ARG]... [--arg ARG]...
// [--cpus N] [--memory MIB] [--volume name:/path[:ro]]... [--wait] [--timeout S]:
// changes those service fields (when given, service-changes.ts), records a deployment, and with --wait follows its events
// (GET /v1/deployments/:id/events) until it is final, printing each state.

export interface Deployment {
  id: string;
  status: string;
  reason: string | null;
  final?: boolean;
  rollbackOf?: string | null;
}

/** Exit code of a final state. */
function exitOf(status: string): number {
  if (status === 'running') return EXIT.OK;
  if (status === 'unreachable' || status === 'ack_timeout') return EXIT.NODE_UNREACHABLE;
  return EXIT.DEPLOYMENT_FAILED;
}

export interface DeployOptions extends ServiceChangeOptions {
  wait?: boolean;
  timeout?: string;
}

/** --timeout in whole seconds (default 300). */
export function timeoutOf(options: { timeout?: string }): number {
  const timeoutS = options.timeout === undefined ? 300 : Number(options.timeout);
  if (!Number.isInteger(timeoutS) || timeoutS < 1 || timeoutS > 86_400) throw usage('--timeout takes whole seconds, 1-86400');
  return timeoutS;
}

export async function deploy(ctx: Context, args: string[], options: DeployOptions): Promise<number> {
  const ref = positional(args, 0, 'service');
  const timeoutS = timeoutOf(options);
  const client = ctx.client();
  const service = await resolveService(client, ref);
  const changes = serviceChanges(options);
  if (Object.keys(changes).length > 0) {
    await client.call('PATCH', `/v1/services/${service.id}`, changes);
    ctx.out.say(`${service.name}: ${describeChanges(changes)}`);
  }
  const started = performance.now();
  const { body: created } = await client.call<Deployment>('POST', `/v1/services/${service.id}/deployments`);
  ctx.out.say(`deployment ${created.id} of ${service.name}: ${created.status}`);
  return follow(ctx, service.name, created, started, options.wait === true, timeoutS);
}

/** Without --wait, prints the deployment; with it, follows its events until it is final (also `tether rollback`). */
export async function follow(ctx: Context, serviceName: string, created: Deployment, started: number, wait: boolean, timeoutS: number): Promise<number> {
  const client = ctx.client();
  const elapsed = () => `${((performance.now() - started) / 1000).toFixed(1)}s`;
  if (!wait) {
    ctx.out.data(created);
    return EXIT.OK;
  }

  const timeout = AbortSignal.timeout(timeoutS * 1000);
  const signal = AbortSignal.any([ctx.signal, timeout]);
  let last: Deployment = created;
  try {
    const res = await client.stream(`/v1/deployments/${created.id}/events`, 'text/event-stream', signal);
    for await (const event of serverSentEvents(res.body)) {
      if (event.event === 'gone') throw new CliError('API_ERROR', `NOT_FOUND: deployment ${created.id} was deleted with its service`, { apiCode: 'NOT_FOUND' });
      if (event.event !== 'deployment') continue;
      const now = JSON.parse(event.data) as Deployment;
      if (now.status !== last.status || now.reason !== last.reason) ctx.out.say(`  ${elapsed().padStart(6)}  ${now.status}${now.reason ? `: ${now.reason}` : ''}`);
      last = now;
      if (now.final) break;
    }
  } catch (err) {
    if (!signal.aborted) throw err;
  }
  ctx.out.data(last);
  if (!last.final) {
    const why = ctx.signal.aborted ? 'stopped waiting' : timeout.aborted ? `--timeout ${timeoutS}s ended` : 'the event stream ended';
    if (!ctx.signal.aborted && !timeout.aborted) throw new CliError('STREAM_LOST', `${why} before deployment ${created.id} was final (${last.status})`);
    ctx.out.warn(`${why} before deployment ${created.id} was final: it is ${last.status} and goes on (tether status ${serviceName})`);
    return EXIT.WAIT_ENDED;
  }
  const code = exitOf(last.status);
  const line = `deployment ${created.id} ${last.status} after ${elapsed()}${last.reason ? `: ${last.reason}` : ''}`;
  if (code === EXIT.OK) ctx.out.say(line);
  else ctx.out.warn(line);
  return code;
}
