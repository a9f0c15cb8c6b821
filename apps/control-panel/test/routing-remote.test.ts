import { beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@tether/common';
import { CAPABILITIES, type Route } from '@tether/protocol';
import { DbRoutingMapSource } from '../src/routing/routing-map.js';
import { RoutingAudience } from '../src/routing/routing-audience.js';
import { servingNodes } from '../src/routing/serving-nodes.js';
import { sqlOf } from '../src/db/database.js';
import { useMigratedDatabase } from './helpers/migrated-database.js';

// Cross-node routing on the panel (issue 37) against a real PostgreSQL: which
// nodes serve a routed service managed by allocations, what each one's map
// carries (its local replicas implied, the others' endpoints in `remote`),
// and which maps a change on one node touches. Rows are written as the
// session side writes them (capabilities and private address at the open,
// allocation statuses as reported).

const db = useMigratedDatabase();
const exec = (text: string, ...values: unknown[]) => db.prisma.$executeRawUnsafe(text, ...values);

const REMOTE = [CAPABILITIES.WORKLOAD_ALLOCATIONS, CAPABILITIES.ROUTING_REMOTE];
const nodes: Record<string, string> = {};
let teamId = '';

async function node(name: string, capabilities: string[], labels: Record<string, string> = {}, address: string | null = null) {
  const row = await db.prisma.node.create({ data: { name, tokenHash: `hash-${name}`, capabilities, labels, privateAddress: address } });
  nodes[name] = row.id;
  return row.id;
}

/** A routed service homed on `home`, one release, and a `run` allocation per entry, reported as given. */
async function routedService(name: string, home: string, replicas: { node: string; status: Record<string, unknown> | null; desired?: string }[]) {
  const service = await db.prisma.service.create({ data: { teamId, name, image: 'web:1', internalPort: 8080, nodeId: nodes[home]! } });
  const release = await db.prisma.deployment.create({ data: { serviceId: service.id, nodeId: nodes[home]!, spec: { name }, status: 'running' } });
  await db.prisma.route.create({ data: { domain: `${name}.example.com`, pathPrefix: null, serviceId: service.id } });
  for (const r of replicas) {
    await db.prisma.allocation.create({
      data: { serviceId: service.id, nodeId: nodes[r.node]!, releaseId: release.id, cause: 'scale-up', epoch: 1n, desired: r.desired ?? 'run', status: (r.status ?? undefined) as never },
    });
  }
  return service.id;
}

const running = (endpoint: string | null, extra: Record<string, unknown> = {}) => ({ state: 'running', health: 'healthy', endpoint, ...extra });
const mapOf = async (name: string): Promise<Route[]> => (await new DbRoutingMapSource(db.prisma).mapFor(nodes[name]!)).routes;

beforeAll(async () => {
  teamId = (await db.prisma.team.create({ data: { name: 'remote' } })).id;
  await node('a', REMOTE, {}, '10.9.0.1');
  await node('b', REMOTE, {}, '10.9.0.2');
  await node('c', REMOTE, { 'tether.io/ingress': 'true' }, '10.9.0.3');
  await node('old', [CAPABILITIES.WORKLOAD_ALLOCATIONS]);
  await node('gone', REMOTE, {}, '10.9.0.5');
  await exec(`UPDATE nodes SET unreachable_since = now() WHERE name = 'gone'`);
});

describe('routing maps across nodes', () => {
  let web = '';
  beforeAll(async () => {
    web = await routedService('web', 'a', [
      { node: 'a', status: running('10.9.0.1:32001') },
      { node: 'b', status: running('10.9.0.2:32002') },
      { node: 'old', status: running(null) },
      // Not reachable from elsewhere: its node's session is gone, it is unhealthy, it is leaving, or not running yet.
      { node: 'gone', status: running('10.9.0.5:32005') },
      { node: 'b', status: running('10.9.0.2:32003', { health: 'unhealthy' }) },
      { node: 'b', status: running('10.9.0.2:32004'), desired: 'stop' },
      { node: 'a', status: { state: 'starting', health: 'starting', endpoint: '10.9.0.1:32006' } },
    ]);
  });

  it("each serving node's route names the other nodes' serving endpoints, never its own; an entry point names them all", async () => {
    expect(await mapOf('a')).toEqual([
      { domain: 'web.example.com', pathPrefix: null, serviceId: web, upstream: `svc-${web.toLowerCase()}:8080`, remote: [{ node: 'b', endpoint: '10.9.0.2:32002' }] },
    ]);
    expect((await mapOf('b'))[0]!.remote).toEqual([{ node: 'a', endpoint: '10.9.0.1:32001' }]);
    expect((await mapOf('c'))[0]!.remote).toEqual([
      { node: 'a', endpoint: '10.9.0.1:32001' },
      { node: 'b', endpoint: '10.9.0.2:32002' },
    ]);
  });

  it('a node without routing.remote serves its local replicas only: no remote field, so its map hashes as before', async () => {
    const [route] = await mapOf('old');
    expect(route).toBeDefined();
    expect(route).not.toHaveProperty('remote');
  });

  it('a node whose session closes leaves every other map; back, it is in them again', async () => {
    await exec(`UPDATE nodes SET unreachable_since = now() WHERE name = 'b'`);
    expect((await mapOf('a'))[0]!.remote).toEqual([]);
    expect((await mapOf('c'))[0]!.remote).toEqual([{ node: 'a', endpoint: '10.9.0.1:32001' }]);
    await exec(`UPDATE nodes SET unreachable_since = NULL WHERE name = 'b'`);
    expect((await mapOf('a'))[0]!.remote).toEqual([{ node: 'b', endpoint: '10.9.0.2:32002' }]);
  });

  it('serving nodes: replicas and entry points, each with its private address, the same nodes the maps go to', async () => {
    const serving = await servingNodes(sqlOf(db.prisma), [web]);
    expect(serving.map((s) => [s.node_name, s.role, s.private_address])).toEqual([
      ['a', 'replica', '10.9.0.1'],
      ['b', 'replica', '10.9.0.2'],
      ['c', 'ingress', '10.9.0.3'],
      ['gone', 'replica', '10.9.0.5'],
      ['old', 'replica', null],
    ]);
    for (const s of serving) expect((await mapOf(s.node_name)).map((r) => r.serviceId)).toContain(web);
  });

  it('a change on one node reaches every node serving its routed services, in one lookup per window', async () => {
    const heard: { nodeIds: string[]; reason: string }[] = [];
    const audience = new RoutingAudience({ prisma: db.prisma, changed: (nodeIds, reason) => heard.push({ nodeIds, reason }), logger: silentLogger, windowMs: 20 });
    audience.nodeChanged(nodes.b!, 'a replica reported');
    audience.nodeChanged(nodes.a!, "a node's session closed");
    await new Promise((r) => setTimeout(r, 100));
    expect(heard).toHaveLength(1);
    expect(heard[0]!.nodeIds).toEqual([nodes.a, nodes.b, nodes.c, nodes.gone, nodes.old].sort());
    // A node with nothing routed on it touches no map.
    const lone = await node('lone', REMOTE);
    audience.nodeChanged(lone, 'a replica reported');
    await new Promise((r) => setTimeout(r, 100));
    expect(heard).toHaveLength(1);
    await audience.stop();
  });
});

describe('a service placed on one node (not managed by allocations)', () => {
  it('is served by its node once a deployment was delivered there, as before', async () => {
    const home = await node('single', [CAPABILITIES.SECRETS]);
    const service = await db.prisma.service.create({ data: { teamId, name: 'single', image: 'web:1', internalPort: 80, nodeId: home } });
    await db.prisma.route.create({ data: { domain: 'single.example.com', pathPrefix: '/api', serviceId: service.id } });
    expect(await mapOf('single')).toEqual([]);
    await db.prisma.deployment.create({ data: { serviceId: service.id, nodeId: home, spec: {}, status: 'delivered' } });
    expect(await mapOf('single')).toEqual([{ domain: 'single.example.com', pathPrefix: '/api', serviceId: service.id, upstream: `svc-${service.id.toLowerCase()}:80` }]);
    expect((await servingNodes(sqlOf(db.prisma), [service.id])).map((s) => [s.node_name, s.role])).toEqual([['single', 'home']]);
  });
});
