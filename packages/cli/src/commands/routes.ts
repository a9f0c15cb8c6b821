import { positional, resolveService, type Context } from '../context.js';
import { usage } from '../errors.js';
import { table } from '../output.js';
import { certificateText, healthText, type RouteState } from './route-lines.js';

interface Route extends RouteState {
  id: string;
  serviceId: string;
}

/** tether routes [add <domain> <service> [--path P] | rm <domain|id>]. */
export async function routes(ctx: Context, args: string[], options: { path?: string }): Promise<number> {
  const client = ctx.client();
  const [action, ...rest] = args;
  if (action === undefined || action === 'ls' || action === 'list') {
    const { body } = await client.call<Route[]>('GET', '/v1/routes');
    ctx.out.data(body);
    if (body.length === 0) {
      ctx.out.say('no routes');
      return 0;
    }
    // Services by name where the token sees them; a route of one it does not see keeps its id.
    const { body: services } = await client.call<Array<{ id: string; name: string }>>('GET', '/v1/services');
    const nameOf = new Map(services.map((s) => [s.id, s.name]));
    ctx.out.say(
      table(
        ['DOMAIN', 'PATH', 'SERVICE', 'HEALTH', 'CERTIFICATE', 'ID'],
        body.map((r) => [r.domain, r.pathPrefix ?? '/', nameOf.get(r.serviceId) ?? r.serviceId, healthText(r), certificateText(r.certificate, Date.now()), r.id]),
      ),
    );
    return 0;
  }
  if (action === 'add') {
    const domain = positional(rest, 0, 'domain');
    const service = await resolveService(client, positional(rest, 1, 'service'));
    const { body } = await client.call<Route>('POST', '/v1/routes', { domain, serviceId: service.id, ...(options.path ? { pathPrefix: options.path } : {}) });
    ctx.out.data(body);
    ctx.out.say(`route ${body.domain}${body.pathPrefix ?? ''} → ${service.name} (${body.id})`);
    return 0;
  }
  if (action === 'rm' || action === 'remove') {
    const ref = positional(rest, 0, 'domain or route id');
    const { body } = await client.call<Route[]>('GET', '/v1/routes');
    const matches = body.filter((r) => r.id === ref || r.domain === ref);
    if (matches.length === 0) throw usage(`no route ${ref} (see \`tether routes\`)`);
    if (matches.length > 1) throw usage(`${matches.length} routes on ${ref} (path prefixes): give the route id (${matches.map((r) => r.id).join(', ')})`);
    await client.call('DELETE', `/v1/routes/${matches[0]!.id}`);
    ctx.out.data({ removed: matches[0] });
    ctx.out.say(`removed route ${matches[0]!.domain}${matches[0]!.pathPrefix ?? ''}`);
    return 0;
  }
  throw usage(`unknown routes action ${action}: use add or rm`);
}
