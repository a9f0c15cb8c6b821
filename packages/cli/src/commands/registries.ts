import { positional, type Context } from '../context.js';
import { usage } from '../errors.js';
import { table } from '../output.js';
import { promptHidden, readAll } from './login.js';

interface Registry {
  id: string;
  teamId: string;
  host: string;
  username: string;
  updatedAt: string;
}

/**
 * tether registries [add <host> --username U | rm <host|id>]. The password comes from stdin when it is
 * not a terminal, else from a prompt that does not echo: never from an argument (shell history, `ps`).
 * `add` of a host the team has replaces its credentials.
 */
export async function registries(ctx: Context, args: string[], options: { username?: string }): Promise<number> {
  const client = ctx.client();
  const [action, ...rest] = args;
  if (action === undefined || action === 'ls' || action === 'list') {
    const { body } = await client.call<Registry[]>('GET', '/v1/registries');
    ctx.out.data(body);
    ctx.out.say(body.length === 0 ? 'no registries' : table(['HOST', 'USERNAME', 'UPDATED', 'ID'], body.map((r) => [r.host, r.username, r.updatedAt, r.id])));
    return 0;
  }
  if (action === 'add') {
    const host = positional(rest, 0, 'host');
    if (!options.username) throw usage('registries add needs --username');
    const password = (ctx.stdin.isTTY ? await promptHidden(ctx.stdin as NodeJS.ReadStream, 'registry password: ') : await readAll(ctx.stdin)).replace(/\r?\n$/, '');
    if (!password) throw usage('no password given (pipe it on stdin or type it at the prompt)');
    const body = { host, username: options.username, password };
    const existing = (await client.call<Registry[]>('GET', '/v1/registries')).body.find((r) => r.host === host.toLowerCase());
    const { body: saved } = existing ? await client.call<Registry>('PUT', `/v1/registries/${existing.id}`, body) : await client.call<Registry>('POST', '/v1/registries', body);
    ctx.out.data(saved);
    ctx.out.say(`${existing ? 'replaced' : 'added'} registry ${saved.host} as ${saved.username} (${saved.id})`);
    return 0;
  }
  if (action === 'rm' || action === 'remove') {
    const ref = positional(rest, 0, 'host or registry id');
    const { body } = await client.call<Registry[]>('GET', '/v1/registries');
    const match = body.find((r) => r.id === ref || r.host === ref.toLowerCase());
    if (!match) throw usage(`no registry ${ref} (see \`tether registries\`)`);
    await client.call('DELETE', `/v1/registries/${match.id}`);
    ctx.out.data({ removed: match });
    ctx.out.say(`removed registry ${match.host}`);
    return 0;
  }
  throw usage(`unknown registries action ${action}: use add or rm`);
}
