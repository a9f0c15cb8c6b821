import { positional, type Context } from '../context.js';
import { usage } from '../errors.js';
import { table } from '../output.js';

interface Volume {
  id: string;
  nodeName: string;
  serviceId: string;
  serviceName: string | null;
  name: string;
  dockerName: string;
  mountPath: string | null;
  kept: boolean;
  sizeBytes: number | null;
  measuredAt: string | null;
}

/** 1536 → "1.5 KiB"; null → "?" (not measured, or over the agent's budget). */
export function formatBytes(bytes: number | null): string {
  if (bytes === null) return '?';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${bytes} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** tether volumes [--kept] | tether volumes rm <id|docker name>. */
export async function volumes(ctx: Context, args: string[], options: { kept?: boolean }): Promise<number> {
  const client = ctx.client();
  const [action, ...rest] = args;
  if (action === undefined || action === 'ls' || action === 'list') {
    const { body } = await client.call<Volume[]>('GET', `/v1/volumes${options.kept ? '?kept=true' : ''}`);
    ctx.out.data(body);
    ctx.out.say(
      body.length === 0
        ? 'no volumes'
        : table(
            ['NODE', 'SERVICE', 'VOLUME', 'MOUNT', 'SIZE', 'ID'],
            body.map((v) => [v.nodeName, v.serviceName ?? v.serviceId, v.name, v.kept ? '(kept)' : (v.mountPath ?? '-'), formatBytes(v.sizeBytes), v.id]),
          ),
    );
    return 0;
  }
  if (action === 'rm' || action === 'remove') {
    const ref = positional(rest, 0, 'volume id or Docker volume name');
    const { body } = await client.call<Volume[]>('GET', '/v1/volumes');
    const matches = body.filter((v) => v.id === ref || v.dockerName === ref);
    if (matches.length === 0) throw usage(`no volume ${ref} (see \`tether volumes\`)`);
    if (matches.length > 1) throw usage(`${matches.length} volumes named ${ref} (on ${matches.map((v) => v.nodeName).join(', ')}): give the volume id (${matches.map((v) => v.id).join(', ')})`);
    const target = matches[0]!;
    const { body: removed } = await client.call<Volume>('DELETE', `/v1/volumes/${target.id}`);
    ctx.out.data({ removing: removed });
    ctx.out.say(`removing volume ${target.name} of ${target.serviceName ?? target.serviceId} on ${target.nodeName} (its data goes; it leaves \`tether volumes\` with the node's next report)`);
    return 0;
  }
  throw usage(`unknown volumes action ${action}: use rm`);
}
