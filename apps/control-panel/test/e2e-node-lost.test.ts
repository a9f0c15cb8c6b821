import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { dockerApi, ensureDocker, ensureSecondDaemonSupport, secondDaemon, sleep, waitFor, type SecondDaemon } from '@tether/testkit';
import { AGENT_ENV, byNode, startFleet, type Fleet } from './helpers/node-fleet.js';
import { startAgentProcess, type AgentProcess } from './helpers/agent-process.js';

// Issue 38, "stateful services never move on a guess", end to end: real panel, real agents as processes, real
// Docker. The stateful node runs on a private second engine (its own disk: a Docker volume is named by its service
// alone and is per engine, so nodes sharing one engine would share it), the other node on the shared engine. A service with a volume and a file in it on that node; its agent
// frozen past the teardown and the grace: the service stays there, reads unknown, nothing runs elsewhere. Declared
// lost: it runs on another node on an empty volume. The agent thawed: refused, it stops the old container and never
// starts it again.

const RESCHEDULE_AFTER_MS = 1_500;

const docker = await ensureDocker();
const daemonSupport = await ensureSecondDaemonSupport();

describe.skipIf(!docker.available || !daemonSupport.available)('a lost node: its stateful service moves only when an operator says so', () => {
  let fleet: Fleet;
  let daemon: SecondDaemon;
  let lostAgent: AgentProcess;
  let lostNode: { id: string; name: string; token: string };
  const tag = `lost-${process.pid}`;

  beforeAll(async () => {
    daemon = secondDaemon(`lost-${process.pid}`);
    const [started] = await Promise.all([
      startFleet({ tag, nodes: 1, panelEnv: { TETHER_RESCHEDULE_AFTER_MS: String(RESCHEDULE_AFTER_MS) } }),
      daemon.start(),
    ]);
    fleet = started;
    await daemon.loadImages([fleet.image]);
    // Named before the fleet's nodes: an unplaced service goes to the node with the fewest services, then by name.
    lostNode = await fleet.panel.createNode(`${tag}-a`);
    lostAgent = await startAgentProcess({ panelUrl: fleet.panel.url, token: lostNode.token, nodeName: lostNode.name, runtime: 'docker', env: { ...AGENT_ENV, DOCKER_HOST: daemon.dockerHost } });
    fleet.agents.push(lostAgent);
    await waitFor(() => fleet.panel.app.agentSide.registry.get(lostNode.id), { timeoutMs: 10_000, message: 'session of the stateful node' });
    await fleet.panel.settled();
  }, 60_000);
  afterEach((context) => fleet.explain(context));
  afterAll(async () => {
    await fleet?.close();
    await daemon?.destroy();
  });

  const onLost = async (serviceId: string) => {
    const filters = encodeURIComponent(JSON.stringify({ label: [`tether.service=${serviceId}`] }));
    return JSON.parse((await dockerApi('GET', `/containers/json?all=1&filters=${filters}`, undefined, undefined, daemon.socket)).body) as { Id: string; State: string }[];
  };
  const mountpoint = async (volume: string, socket?: string) => (JSON.parse((await dockerApi('GET', `/volumes/${volume}`, undefined, undefined, socket)).body) as { Mountpoint: string }).Mountpoint;

  it('frozen past the grace it stays (unknown); declared lost it runs elsewhere on an empty volume; thawed, its agent stops the old copy for good', async () => {
    const startedAt = performance.now();
    const { panel, nodes } = fleet;
    const svc = await panel.api('POST', '/v1/services', { teamId: fleet.teamId, name: 'db', image: fleet.image, internalPort: 8080, placement: {}, volumes: [{ name: 'data', mountPath: '/data' }] });
    expect(svc.status).toBe(201);
    expect(svc.body.nodeName).toBe(lostNode.name);
    const serviceId = svc.body.id as string;
    const deploy = await panel.api('POST', `/v1/services/${serviceId}/deployments`, {});
    expect(await fleet.settled(deploy.body.id, 30_000)).toMatchObject({ status: 'running' });
    const [old] = await onLost(serviceId);
    expect(old).toMatchObject({ State: 'running' });
    const volume = `tether-${serviceId}-data`;
    writeFileSync(path.join(await mountpoint(volume, daemon.socket), 'customer-data'), 'precious\n');

    // Frozen: torn down at the read-idle deadline, then past the grace. A stateless replica would move now; this stays.
    process.kill(lostAgent.process.pid!, 'SIGSTOP');
    await waitFor(() => (panel.app.agentSide.registry.get(lostNode.id) ? undefined : true), { timeoutMs: 10_000, intervalMs: 20, message: 'torn down' });
    // Sampled until past the grace: nothing of it runs anywhere else.
    const pastGrace = performance.now() + RESCHEDULE_AFTER_MS + 500;
    while (performance.now() < pastGrace) {
      expect(await fleet.containers(serviceId)).toEqual([]);
      await sleep(100);
    }
    const status = await panel.api('GET', `/v1/services/${serviceId}/status`);
    expect(status.body.state).toBe('unknown');
    expect((await panel.api('GET', `/v1/services/${serviceId}`)).body.nodeName).toBe(lostNode.name);
    expect(await fleet.containers(serviceId)).toEqual([]);
    expect(await panel.prisma.allocation.findMany({ where: { serviceId, desired: 'run' }, select: { nodeId: true } })).toEqual([{ nodeId: lostNode.id }]);

    // Declared lost: it moves home, the answer names the volume that starts empty; it runs on the new home.
    const declaredAt = performance.now();
    const lost = await panel.api('POST', `/v1/nodes/${lostNode.id}/lost`, { confirm: true });
    expect(lost.status).toBe(200);
    expect(lost.body.moved).toEqual([{ serviceId, serviceName: 'db', from: lostNode.name, to: expect.any(String), emptyVolumes: [{ name: 'data', mountPath: '/data' }] }]);
    const to = lost.body.moved[0].to as string;
    expect(to).toBe(nodes[0]!.name);
    const replacement = await waitFor(async () => (await fleet.running(serviceId))[0], { timeoutMs: 15_000, intervalMs: 50, message: 'running on its new home' });
    const runningMs = performance.now() - declaredAt;
    expect(byNode([replacement])).toEqual([to]);
    expect(existsSync(path.join(await mountpoint(volume), 'customer-data'))).toBe(false);
    expect((await onLost(serviceId)).map((c) => c.State)).toEqual(['running']);

    // Thawed: its agent reconnects, is refused (403 AGENT_DECOMMISSIONED), stops the old copy and never starts it.
    const thawedAt = performance.now();
    process.kill(lostAgent.process.pid!, 'SIGCONT');
    await waitFor(async () => ((await onLost(serviceId))[0]?.State === 'running' ? undefined : true), { timeoutMs: 10_000, intervalMs: 50, message: 'old copy stopped' });
    const stoppedMs = performance.now() - thawedAt;
    const until = performance.now() + 3_000;
    while (performance.now() < until) {
      expect((await onLost(serviceId)).filter((c) => c.State === 'running')).toEqual([]);
      await sleep(100);
    }
    expect(lostAgent.process.output()).toMatch(/"level":50[^\n]*decommissioned/);
    expect((await fleet.running(serviceId)).map((c) => c.Id)).toEqual([replacement.Id]);
    console.log(`node lost: replacement running ${Math.round(runningMs)} ms after POST lost; old copy stopped ${Math.round(stoppedMs)} ms after SIGCONT; case ${Math.round(performance.now() - startedAt)} ms`);
  }, 60_000);
});
