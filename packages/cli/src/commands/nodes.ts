import { positional, type Context } from '../context.js';
import { usage } from '../errors.js';
import { table } from '../output.js';

interface Node {
  id: string;
  name: string;
  labels: Record<string, string>;
  cordoned: boolean;
  evacuating?: boolean;
  decommissioned: boolean;
  services: number;
}

interface Evacuation {
  node: Node;
  moves: { serviceName: string; from: string; to: string }[];
  refused: { serviceName: string; code: string; message: string }[];
  pending: { serviceName: string; count: number; code: string }[];
}

interface Lost {
  node: Node;
  moved: { serviceName: string; from: string; to: string; emptyVolumes: { name: string; mountPath: string }[] }[];
  pending: { serviceName: string; code: string; message: string }[];
}

/**
 * tether node [ls | cordon <name> | evacuate <name> | uncordon <name> | label <name> KEY=VALUE... KEY-... | lost <name> --confirm]
 * (operators). Cordon stops new placements on the node and moves nothing; evacuate cordons it and has the
 * scheduler move its replicas away one at a time, printing what moves and what stays (with the code why);
 * uncordon ends both and moves nothing back; labels are merged as `kubectl label` does: KEY=VALUE
 * sets, KEY- removes, others are kept. Lost (only with --confirm) says the host is gone: the node is decommissioned
 * and its services move to other nodes, the stateful ones on empty volumes, which it names.
 */
export async function nodes(ctx: Context, args: string[], options: { confirm?: boolean } = {}): Promise<number> {
  const client = ctx.client();
  const [action, ...rest] = args;
  const byName = async (name: string): Promise<Node> => {
    const match = (await client.call<Node[]>('GET', '/v1/nodes')).body.find((n) => n.name === name || n.id === name);
    if (!match) throw usage(`no node ${name} (see \`tether node ls\`)`);
    return match;
  };
  if (action === undefined || action === 'ls' || action === 'list') {
    const { body } = await client.call<Node[]>('GET', '/v1/nodes');
    ctx.out.data(body);
    const state = (n: Node) => (n.decommissioned ? 'decommissioned' : n.evacuating ? 'evacuating' : n.cordoned ? 'cordoned' : 'schedulable');
    const labels = (n: Node) => Object.entries(n.labels).map(([k, v]) => `${k}=${v}`).join(',') || '-';
    ctx.out.say(body.length === 0 ? 'no nodes' : table(['NAME', 'STATE', 'SERVICES', 'LABELS'], body.map((n) => [n.name, state(n), String(n.services), labels(n)])));
    return 0;
  }
  if (action === 'cordon' || action === 'uncordon') {
    const node = await byName(positional(rest, 0, 'node'));
    const { body } = await client.call<Node>('POST', `/v1/nodes/${node.id}/${action}`);
    ctx.out.data(body);
    ctx.out.say(
      body.cordoned
        ? `node ${body.name} cordoned: nothing new is placed on it; its ${body.services} service(s) keep running and deploying`
        : `node ${body.name} takes new placements again; nothing moves back by itself`,
    );
    return 0;
  }
  if (action === 'evacuate') {
    const node = await byName(positional(rest, 0, 'node'));
    const { body } = await client.call<Evacuation>('POST', `/v1/nodes/${node.id}/evacuate`);
    ctx.out.data(body);
    const lines = [`node ${body.node.name} cordoned and evacuating: ${body.moves.length} replica(s) move, one at a time (each new one healthy before the old one drains)`];
    for (const m of body.moves) lines.push(`  move  ${m.serviceName}: ${m.from} → ${m.to}`);
    for (const r of body.refused) lines.push(`  stays ${r.serviceName}: ${r.code}: ${r.message}`);
    for (const p of body.pending) lines.push(`  stays ${p.serviceName} (${p.count}): ${p.code}: no eligible node now`);
    lines.push(`\`tether node uncordon ${body.node.name}\` ends it; nothing moves back`);
    ctx.out.say(lines.join('\n'));
    return 0;
  }
  if (action === 'lost') {
    const node = await byName(positional(rest, 0, 'node'));
    if (options.confirm !== true) {
      throw usage(`node lost decommissions ${node.name} for good and starts its stateful services elsewhere on EMPTY volumes (their data stays on the lost host): add --confirm`);
    }
    const { body } = await client.call<Lost>('POST', `/v1/nodes/${node.id}/lost`, { confirm: true });
    ctx.out.data(body);
    const lines = [`node ${body.node.name} declared lost: decommissioned (its agent is refused and stops what it runs); ${body.moved.length} service(s) moved now`];
    for (const m of body.moved) {
      const empty = m.emptyVolumes.map((v) => `${v.name} (${v.mountPath})`).join(', ');
      lines.push(`  moved ${m.serviceName}: ${m.from} → ${m.to}${empty ? `; starts on EMPTY volumes: ${empty}: restore their data from your backup` : ''}`);
    }
    for (const p of body.pending) lines.push(`  stays ${p.serviceName}: ${p.code}: ${p.message}`);
    ctx.out.say(lines.join('\n'));
    return 0;
  }
  if (action === 'label') {
    const node = await byName(positional(rest, 0, 'node'));
    const changes = rest.slice(1);
    if (changes.length === 0) throw usage('node label needs KEY=VALUE to set or KEY- to remove');
    const labels: Record<string, string | null> = {};
    for (const change of changes) {
      const eq = change.indexOf('=');
      if (eq > 0) labels[change.slice(0, eq)] = change.slice(eq + 1);
      else if (change.endsWith('-') && change.length > 1) labels[change.slice(0, -1)] = null;
      else throw usage(`${change}: write KEY=VALUE to set a label or KEY- to remove one`);
    }
    const { body } = await client.call<Node>('PATCH', `/v1/nodes/${node.id}`, { labels });
    ctx.out.data(body);
    const now = Object.entries(body.labels).map(([k, v]) => `${k}=${v}`).join(', ');
    ctx.out.say(`node ${body.name} labels: ${now || 'none'}`);
    return 0;
  }
  throw usage(`unknown node action ${action}: use ls, cordon, evacuate, uncordon, label or lost`);
}
