import { table } from '../output.js';
import type { Context, Service } from '../context.js';

/** tether services: the services the token sees. */
export async function services(ctx: Context): Promise<number> {
  const { body } = await ctx.client().call<Service[]>('GET', '/v1/services');
  ctx.out.data(body);
  ctx.out.say(
    body.length === 0
      ? 'no services'
      : table(
          ['NAME', 'ID', 'NODE', 'REPLICAS', 'IMAGE'],
          body.map((s) => [s.name, s.id, s.nodeName ?? '(pending)', String(s.replicas), s.image]),
        ),
  );
  return 0;
}
