import { resolveService, type Context } from '../context.js';
import { table } from '../output.js';
import { noServicesHint } from './next-steps.js';
import { certificateText, healthText, routeName, routeProblems, servingText, type RouteState } from './route-lines.js';

interface ServiceStatus {
  serviceId: string;
  name: string;
  /** Null: no node yet (every replica pending). */
  node: { name: string } | null;
  state: string;
  desiredReplicas: number;
  runningReplicas: number | null;
  reason: string;
  evidence: { sessionId: string; lastFrameAgeMs: number } | null;
  containers?: { name: string; state: string; health: string; lastProbe?: { at: string; status: number | null; error: string | null; latencyMs: number } }[];
  /** Absent from panels before route health in status. */
  routes?: RouteState[];
  /** Replicas no live session proves; absent from panels before status per replica. */
  unknownReplicas?: number;
  /** One per allocation of a service managed by allocations (issue 36); empty or absent otherwise. */
  allocations?: Replica[];
}

interface Replica {
  /** Null (and node null): a replica waiting for an eligible node (state pending). */
  allocationId: string | null;
  node: { name: string } | null;
  desired: 'run' | 'stop';
  state: string;
  health: string | null;
  code: string | null;
  reason: string | null;
  evidence: { sessionId: string; statusAgeMs: number } | null;
}

const serving = (r: Replica) => r.state === 'running' && (r.health === 'healthy' || r.health === 'none');

/** A line for each replica that should run and does not run healthy (unknown, failed, unhealthy, pending…). */
function replicaProblems(s: ServiceStatus): string[] {
  return (s.allocations ?? [])
    .filter((r) => r.desired === 'run' && !serving(r))
    .map((r) => {
      const state = r.state === 'running' && r.health ? `running, ${r.health}` : r.state;
      const why = [r.code, r.reason].filter(Boolean).join(': ');
      const seen = r.evidence ? ` (last status ${Math.round(r.evidence.statusAgeMs / 1000)} s ago, session ${r.evidence.sessionId})` : '';
      const which = r.allocationId === null || r.node === null ? 'replica not placed' : `replica ${r.allocationId} on ${r.node.name}`;
      return `${which}: ${state}${why ? ` ${why}` : ''}${seen}`;
    });
}

/** One container's line: its state, and its health check's verdict and last probe when it has one. */
const containerLine = (c: NonNullable<ServiceStatus['containers']>[number]) => {
  const p = c.lastProbe;
  const probe = p ? `, last probe ${p.status === null ? 'no answer' : `status ${p.status}`}${p.error ? ` (${p.error})` : ''} in ${p.latencyMs} ms at ${p.at}` : '';
  return `  ${c.name}: ${c.state}${c.health === 'none' ? '' : `, ${c.health}`}${probe}`;
};

const replicas = (s: ServiceStatus) => `${s.runningReplicas ?? '?'}/${s.desiredReplicas}`;

/** Nodes named in the NODE column before it says `N nodes` instead. */
const NODES_LISTED = 3;

/**
 * Where the service runs: the nodes of its replicas that should run (by name), or `N nodes` past three; the home
 * node for a service without allocations (a single-node service, a panel before status per replica).
 */
function nodesText(s: ServiceStatus): string {
  const names = [...new Set((s.allocations ?? []).flatMap((r) => (r.desired === 'run' && r.node ? [r.node.name] : [])))].sort();
  if (names.length === 0) return s.node?.name ?? '-';
  return names.length > NODES_LISTED ? `${names.length} nodes` : names.join(',');
}

/** tether status [service]: desired vs running replicas, proven by the node's live session. */
export async function status(ctx: Context, args: string[]): Promise<number> {
  const client = ctx.client();
  if (args[0] !== undefined) {
    const service = await resolveService(client, args[0]);
    const { body } = await client.call<ServiceStatus>('GET', `/v1/services/${service.id}/status`);
    ctx.out.data(body);
    ctx.out.say(`${body.name}: ${body.state} (${replicas(body)}) on ${nodesText(body).replace(/,/g, ', ')}\n${body.reason}`);
    for (const c of body.containers ?? []) ctx.out.say(containerLine(c));
    for (const line of replicaProblems(body)) ctx.out.say(`  ${line}`);
    if (body.evidence) ctx.out.say(`evidence: session ${body.evidence.sessionId}, last frame ${body.evidence.lastFrameAgeMs} ms ago`);
    const now = Date.now();
    if (body.routes && body.routes.length > 0) ctx.out.say(`routes: ${servingText(body.routes)}`);
    for (const r of body.routes ?? []) {
      const issuer = r.certificate?.issuer ? ` from ${r.certificate.issuer}` : '';
      ctx.out.say(`  ${routeName(r)}: ${healthText(r)}; certificate ${certificateText(r.certificate, now)}${issuer}`);
    }
    return 0;
  }
  const { body } = await client.call<{ services: ServiceStatus[] }>('GET', '/v1/status');
  ctx.out.data(body);
  if (body.services.length === 0) {
    if (!ctx.out.json) ctx.out.say(await noServicesHint(client));
    return 0;
  }
  const lines = table(
    ['NAME', 'STATE', 'REPLICAS', 'NODE', 'ROUTES', 'REASON'],
    body.services.map((s) => [s.name, s.state, replicas(s), nodesText(s), servingText(s.routes), s.reason]),
  ).split('\n');
  // Under each service's line: its failing routes and its certificates that expire soon or fail.
  const now = Date.now();
  const out = [lines[0]!];
  body.services.forEach((s, i) => {
    out.push(lines[i + 1]!);
    for (const line of replicaProblems(s)) out.push(`  ↳ ${line}`);
    for (const r of s.routes ?? []) for (const problem of routeProblems(r, now)) out.push(`  ↳ ${problem}`);
  });
  ctx.out.say(out.join('\n'));
  return 0;
}
