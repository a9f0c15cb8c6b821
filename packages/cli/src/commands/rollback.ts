import { resolveService, positional, type Context } from '../context.js';
import { follow, timeoutOf, waitOf, type Deployment } from './deploy.js';

// tether rollback <service> [--to DEPLOYMENT] [--wait | --wait-drain] [--timeout S]: POST /v1/services/:id/rollback (the spec of
// the newest earlier deployment that ran, or of --to, written back into the service and deployed), then like
// `tether deploy`: with --wait it follows the deployment until it is final.

export interface RollbackOptions {
  to?: string;
  wait?: boolean;
  'wait-drain'?: boolean;
  timeout?: string;
}

export async function rollback(ctx: Context, args: string[], options: RollbackOptions): Promise<number> {
  const ref = positional(args, 0, 'service');
  const timeoutS = timeoutOf(options);
  const client = ctx.client();
  const service = await resolveService(client, ref);
  const started = performance.now();
  const { body: created } = await client.call<Deployment>('POST', `/v1/services/${service.id}/rollback`, options.to === undefined ? {} : { to: options.to });
  ctx.out.say(`deployment ${created.id} of ${service.name} rolls back to the spec of deployment ${created.rollbackOf ?? '?'}: ${created.status}`);
  return follow(ctx, service.name, created, started, waitOf(options), timeoutS);
}
