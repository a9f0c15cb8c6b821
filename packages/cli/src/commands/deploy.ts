import { serverSentEvents } from '../api-client.js';
import { resolveService, positional, type Context } from '../context.js';
import { CliError, EXIT, usage } from '../errors.js';
import { describeChanges, serviceChanges, type ServiceChangeOptions } from './service-changes.js';

// tether deploy <service> [--image IMG] [--command ARG]... [--arg ARG]...
// [--cpus N] [--memory MIB] [--volume name:/path[:ro]]... [--drain-seconds N] [--max-surge N] [--max-unavailable N] [--progress-deadline S] [--wait | --wait-drain] [--timeout S]:
// changes those service fields (when given, service-changes.ts), records a deployment, and with --wait follows its events
// (GET /v1/deployments/:id/events) until it is final, printing each state; with --wait-drain on until the drain of
// the old containers ended (the stream's `drained` event), printing what it cut.

export interface Deployment {
  id: string;
  status: string;
  reason: string | null;
  final?: boolean;
  rollbackOf?: string | null;
  /** Its agent reports the drain after running (capability workload.drain). */
  runningAt?: string | null;
  spec?: { drainSeconds?: number };
  reportsDrain?: boolean;
  connectionsOpenAtSwitch?: number | null;
  connectionsCut?: number | null;
  drainEndedAt?: string | null;
}

/** What a reported drain says, for people. */
export function describeDrain(d: Deployment): string {
  if (d.connectionsOpenAtSwitch === null || d.connectionsOpenAtSwitch === undefined || d.connectionsCut === null || d.connectionsCut === undefined) {
    return "connections not counted by this node's proxy";
  }
  return `${d.connectionsOpenAtSwitch} connection${d.connectionsOpenAtSwitch === 1 ? '' : 's'} open at the switch, ${d.connectionsCut} cut at the deadline`;
}

/** Exit code of a final state. */
function exitOf(status: string): number {
  if (status === 'running') return EXIT.OK;
  if (status === 'unreachable' || status === 'ack_timeout') return EXIT.NODE_UNREACHABLE;
  return EXIT.DEPLOYMENT_FAILED;
}

export interface DeployOptions extends ServiceChangeOptions {
  wait?: boolean;
  /** --wait-drain: --wait, then on until the drain ended. */
  'wait-drain'?: boolean;
  timeout?: string;
}

/** How far --wait or --wait-drain follow a deployment (none: print it and return). */
export type WaitFor = 'none' | 'final' | 'drain';
export const waitOf = (options: { wait?: boolean; 'wait-drain'?: boolean }): WaitFor => (options['wait-drain'] ? 'drain' : options.wait ? 'final' : 'none');

/** --timeout in whole seconds (default 300). */
export function timeoutOf(options: { timeout?: string }): number {
  const timeoutS = options.timeout === undefined ? 300 : Number(options.timeout);
  if (!Number.isInteger(timeoutS) || timeoutS < 1 || timeoutS > 86_400) throw usage('--timeout takes whole seconds, 1-86400');
  return timeoutS;
}

export async function deploy(ctx: Context, args: string[], options: DeployOptions): Promise<number> {
  const ref = positional(args, 0, 'service');
  const timeoutS = timeoutOf(options);
  // Flags are checked before the panel is asked anything (a usage error calls nothing).
  const changes = serviceChanges(options);
  const client = ctx.client();
  const service = await resolveService(client, ref);
  if (Object.keys(changes).length > 0) {
    await client.call('PATCH', `/v1/services/${service.id}`, changes);
    ctx.out.say(`${service.name}: ${describeChanges(changes)}`);
  }
  const started = performance.now();
  const { body: created } = await client.call<Deployment>('POST', `/v1/services/${service.id}/deployments`);
  ctx.out.say(`deployment ${created.id} of ${service.name}: ${created.status}`);
  return follow(ctx, service.name, created, started, waitOf(options), timeoutS);
}

/**
 * Without --wait, prints the deployment; with it, follows its events until it is final (also `tether rollback`),
 * printing the drain when it is known by then; with --wait-drain, until the drain ended (`drained`).
 */
export async function follow(ctx: Context, serviceName: string, created: Deployment, started: number, wait: WaitFor, timeoutS: number): Promise<number> {
  const client = ctx.client();
  const elapsed = () => `${((performance.now() - started) / 1000).toFixed(1)}s`;
  if (wait === 'none') {
    ctx.out.data(created);
    return EXIT.OK;
  }

  const timeout = AbortSignal.timeout(timeoutS * 1000);
  const signal = AbortSignal.any([ctx.signal, timeout]);
  let last: Deployment = created;
  let drained = false;
  /** The first final state: what the exit code says (a deployment superseded while its drain runs still ran). */
  let settled: Deployment | null = null;
  /** The final line, printed when the deployment settled (before a drain is waited for) or at the end. */
  let settledLine: (() => number) | null = null;
  const summary = (d: Deployment) => {
    const code = exitOf(d.status);
    const line = `deployment ${created.id} ${d.status} after ${elapsed()}${d.reason ? `: ${d.reason}` : ''}`;
    return () => {
      if (code === EXIT.OK) ctx.out.say(line);
      else ctx.out.warn(line);
      return code;
    };
  };
  try {
    const res = await client.stream(`/v1/deployments/${created.id}/events`, 'text/event-stream', signal);
    for await (const event of serverSentEvents(res.body)) {
      if (event.event === 'gone') throw new CliError('API_ERROR', `NOT_FOUND: deployment ${created.id} was deleted with its service`, { apiCode: 'NOT_FOUND' });
      if (event.event !== 'deployment' && event.event !== 'drained') continue;
      const now = JSON.parse(event.data) as Deployment;
      if (now.status !== last.status || now.reason !== last.reason) ctx.out.say(`  ${elapsed().padStart(6)}  ${now.status}${now.reason ? `: ${now.reason}` : ''}`);
      last = now;
      if (now.final && !settled) {
        settled = now;
        settledLine = summary(now);
        // The deployment is settled: said now, while the old containers drain.
        if (wait === 'drain' && now.reportsDrain && now.runningAt) {
          settledLine();
          ctx.out.say(`  waiting for the drain of the containers it replaced (drainSeconds ${now.spec?.drainSeconds ?? '?'})`);
        }
      }
      if (event.event === 'drained') {
        drained = true;
        break;
      }
      // --wait ends at a final state; --wait-drain goes on while the stream does (it ends at once when the agent reports no drain).
      if (now.final && (wait === 'final' || !now.reportsDrain || now.runningAt === null)) break;
    }
  } catch (err) {
    if (!signal.aborted) throw err;
  }
  ctx.out.data(last);
  const whyEnded = () => (ctx.signal.aborted ? 'stopped waiting' : timeout.aborted ? `--timeout ${timeoutS}s ended` : 'the event stream ended');
  if (!last.final) {
    const why = whyEnded();
    if (!ctx.signal.aborted && !timeout.aborted) throw new CliError('STREAM_LOST', `${why} before deployment ${created.id} was final (${last.status})`);
    ctx.out.warn(`${why} before deployment ${created.id} was final: it is ${last.status} and goes on (tether status ${serviceName})`);
    return EXIT.WAIT_ENDED;
  }
  const saidAlready = wait === 'drain' && settled?.reportsDrain === true && Boolean(settled.runningAt);
  const code = saidAlready ? exitOf(settled!.status) : (settledLine ?? summary(last))();
  // The drain of what it replaced: known already (--wait), waited for (--wait-drain), or not reported by this agent.
  if (last.drainEndedAt) ctx.out.say(`drain ended${drained ? ` after ${elapsed()}` : ''} (${last.drainEndedAt}): ${describeDrain(last)}`);
  else if (wait === 'drain' && last.runningAt) {
    if (!last.reportsDrain) ctx.out.say("drain not reported: this node's agent does not announce workload.drain (it drains its own way)");
    else if (drained) ctx.out.warn(`drain of deployment ${created.id} not reported by its agent in time`);
    else {
      const why = whyEnded();
      if (!ctx.signal.aborted && !timeout.aborted) throw new CliError('STREAM_LOST', `${why} before the drain of deployment ${created.id} ended`);
      ctx.out.warn(`${why} before the drain of deployment ${created.id} ended; it goes on`);
      return EXIT.WAIT_ENDED;
    }
  }
  return code;
}
