import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { serviceUpstreamHost, type ContainerState } from '@tether/protocol';
import { WEB_HEALTHCHECK_IMAGE_CONFIG, derivedImage, dockerApi, ensureDocker, ensureSecondDaemonSupport, ensureWebImage, runContainer, secondDaemon, sleep, waitFor } from '@tether/testkit';
import { startAgentProcess, type AgentProcess } from './helpers/agent-process.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { countedReason, expectDeployAccepted, failureReason } from './helpers/deploy-answer.js';

// Issue 5 end to end: REST API → panel → WebSocket session → a real agent
// process → the real Docker engine, and back through heartbeats to
// GET /v1/services/:id/status. Nothing is simulated: containers are killed
// through the Engine API, the agent process is stopped and started again,
// and "the daemon is down" is a private second dockerd really stopped.

const HEARTBEAT_MS = 300;
/** Scheduling jitter on a 2-core machine shared with dockerd: a frame or a status read may be this late. */
const SLACK_MS = 250;
const RESTART_BACKOFF_MS = 1_500;
const PULL_TIMEOUT_MS = 3_000;

const docker = await ensureDocker();
const daemonSupport = await ensureSecondDaemonSupport();

/** The agent's runtime timings, short so each scenario takes seconds (see docs/operations.md). */
const AGENT_ENV = {
  TETHER_MIN_READY_MS: '300',
  TETHER_DRAIN_MS: '200',
  TETHER_STOP_TIMEOUT_MS: '2000',
  TETHER_START_TIMEOUT_MS: '10000',
  TETHER_IMAGE_PULL_TIMEOUT_MS: String(PULL_TIMEOUT_MS),
  TETHER_RESTART_BACKOFF_MIN_MS: String(RESTART_BACKOFF_MS),
  TETHER_RESTART_BACKOFF_MAX_MS: '5000',
};

interface ServiceStatusBody {
  state: string;
  desiredReplicas: number;
  runningReplicas: number | null;
  reason: string;
  containers: ContainerState[];
  evidence: { sessionId: string; lastFrameAgeMs: number; reportAgeMs: number } | null;
}

describe.skipIf(!docker.available)('deploy end to end: REST → panel → agent process → Docker → status', () => {
  let panel: Panel;
  let image: string;
  let healthcheckImage: string;
  let teamId: string;
  const agents: AgentProcess[] = [];
  const cleanups: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    image = await ensureWebImage();
    healthcheckImage = await derivedImage('tether-test/web-hc', WEB_HEALTHCHECK_IMAGE_CONFIG);
    panel = await startPanel({
      env: {
        TETHER_HEARTBEAT_INTERVAL_MS: String(HEARTBEAT_MS),
        TETHER_PING_INTERVAL_MS: '1000',
        TETHER_SESSION_IDLE_MS: '3000',
        TETHER_AGENT_IDLE_MS: '5000',
      },
    });
    const team = await panel.api('POST', '/v1/teams', { name: `e2e-deploy-${process.pid}` });
    expect(team.status).toBe(201);
    teamId = team.body.id;
  });
  afterEach(async (context) => {
    // A failure is explained by what the agents said.
    if (context.task.result?.state === 'fail') {
      for (const a of agents) console.error(`--- agent ${a.nodeName} (pid ${a.process.pid}) output:\n${a.process.output().slice(-6_000)}`);
    }
    // Every agent stops before any cleans up: a restarted node has two, and a live one would recreate what the other removes.
    const stopping = agents.splice(0);
    await Promise.all(stopping.map((a) => a.stop()));
    for (const agent of stopping) await agent.destroy();
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  afterAll(async () => {
    await panel?.close();
  });

  const status = async (serviceId: string): Promise<ServiceStatusBody> => {
    const res = await panel.api('GET', `/v1/services/${serviceId}/status`);
    expect(res.status).toBe(200);
    return res.body;
  };
  /** Polls the service's status until `accept` takes it (bounded), and returns it. */
  const statusWhen = (serviceId: string, accept: (s: ServiceStatusBody) => boolean, message: string, timeoutMs: number, intervalMs = 25) =>
    waitFor(
      async () => {
        const s = await status(serviceId);
        return accept(s) ? s : undefined;
      },
      { timeoutMs, intervalMs, message },
    );
  const deployment = async (id: string) => (await panel.api('GET', `/v1/deployments/${id}`)).body as { status: string; reason: string | null };

  /** Waits (bounded) for a deployment row to leave pending/delivered and returns it. */
  async function settled(id: string, timeoutMs: number) {
    return waitFor(
      async () => {
        const d = await deployment(id);
        return d.status === 'pending' || d.status === 'delivered' ? undefined : d;
      },
      { timeoutMs, intervalMs: 50, message: `deployment ${id} settled` },
    );
  }

  /** GET / of the service through its stable alias, from a container on the agent's network (as the proxy reaches it). */
  async function viaAlias(agent: AgentProcess, serviceId: string): Promise<string> {
    // busybox nc, not wget: the static busybox's wget crashes resolving names (glibc NSS in a static binary).
    const request = `printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 2 ${serviceUpstreamHost(serviceId)} 8080 | tail -n 1`;
    const { exitCode, output } = await runContainer({ network: agent.network, cmd: ['sh', '-c', request], labels: { 'tether.test': `e2e-deploy-${process.pid}` } });
    return exitCode === 0 ? output.trim() : `request exited ${exitCode}: ${output.trim()}`;
  }

  async function startAgent(nodeName: string, token: string, options: { stateDir?: string; env?: Record<string, string> } = {}) {
    const agent = await startAgentProcess({ panelUrl: panel.url, token, nodeName, runtime: 'docker', stateDir: options.stateDir, env: { ...AGENT_ENV, ...options.env } });
    agents.push(agent);
    return agent;
  }

  async function createService(nodeName: string, message: string) {
    const res = await panel.api('POST', '/v1/services', { teamId, name: `web-${nodeName}`, image, env: { MESSAGE: message }, internalPort: 8080, replicas: 1, node: nodeName });
    expect(res.status).toBe(201);
    return res.body.id as string;
  }

  /** A node with a live agent session and a service deployed on it through the API, running. */
  async function deployed(label: string, options: { env?: Record<string, string> } = {}) {
    const node = await panel.createNode(`${label}-${process.pid}`);
    const agent = await startAgent(node.name, node.token, options);
    const session = await waitFor(() => panel.app.agentSide.registry.get(node.id), { timeoutMs: 10_000, message: 'agent session' });
    const message = `ok-${label}`;
    const serviceId = await createService(node.name, message);
    const asked = performance.now();
    const res = await panel.api('POST', `/v1/services/${serviceId}/deployments`, {});
    expectDeployAccepted(panel, res, { serviceId, sessionId: session.id });
    const row = await settled(res.body.id, 15_000);
    const runningMs = performance.now() - asked;
    expect(row).toMatchObject({ status: 'running' });
    // The status report may predate the result by a heartbeat; the next one shows the deployment's container.
    await statusWhen(serviceId, (s) => s.state === 'running' && s.containers.every((c) => c.deploymentId === res.body.id), 'status shows the deployment running', 3_000);
    return { node, agent, session, serviceId, deploymentId: res.body.id as string, message, ackMs: res.ms, runningMs };
  }

  it('a service deployed through the API runs, answers HTTP through its alias, and status says 1/1 running with fresh evidence from the live session', async () => {
    const { node, agent, session, serviceId, deploymentId, message, ackMs, runningMs } = await deployed('deploy');
    console.log(`deploy: answered after ${Math.round(ackMs)} ms, row running after ${Math.round(runningMs)} ms`);

    // What Docker really runs: one container of this deployment, on the agent's network under the service alias.
    const filters = encodeURIComponent(JSON.stringify({ label: [`tether.service=${serviceId}`] }));
    const listed = JSON.parse((await dockerApi('GET', `/containers/json?all=1&filters=${filters}`)).body) as { Id: string; State: string; Labels: Record<string, string> }[];
    expect(listed).toEqual([expect.objectContaining({ State: 'running', Labels: expect.objectContaining({ 'tether.deployment': deploymentId, 'tether.node': node.name }) })]);
    expect(await viaAlias(agent, serviceId)).toBe(message);

    // Several reads over a few heartbeats: every one is 1/1 running, proven by the live session, never older than a heartbeat.
    const ages: number[] = [];
    for (let i = 0; i < 8; i += 1) {
      const s = await status(serviceId);
      expect(s).toMatchObject({ state: 'running', desiredReplicas: 1, runningReplicas: 1, reason: countedReason(panel, 1, 1, session.id) });
      expect(s.containers).toEqual([expect.objectContaining({ containerId: listed[0]!.Id, deploymentId, state: 'running', exitCode: null })]);
      expect(s.evidence?.sessionId).toBe(panel.app.agentSide.registry.get(node.id)?.id);
      expect(s.evidence?.sessionId).toBe(session.id);
      ages.push(s.evidence!.lastFrameAgeMs);
      await sleep(HEARTBEAT_MS / 2);
    }
    console.log(`status evidence lastFrameAgeMs over 8 reads: ${ages.join(', ')} (heartbeat ${HEARTBEAT_MS} ms)`);
    for (const age of ages) {
      expect(age).toBeGreaterThanOrEqual(0);
      expect(age).toBeLessThan(HEARTBEAT_MS + SLACK_MS);
    }
  });

  it('a container killed from outside shows as exited within one heartbeat; the agent restarts it after its backoff and status is running again', async () => {
    const { agent, session, serviceId, message } = await deployed('crash');
    const [before] = (await status(serviceId)).containers;

    const kill = await dockerApi('POST', `/containers/${before!.containerId}/kill`);
    expect(kill.status).toBe(204);
    const killedAt = performance.now();
    const down = await statusWhen(serviceId, (s) => s.state === 'down', 'status shows the crash', 5_000, 10);
    const seenMs = performance.now() - killedAt;
    expect(down).toMatchObject({ runningReplicas: 0, evidence: { sessionId: session.id } });
    // SIGKILL: exit code 137, read from Docker, not what the agent last asked for.
    expect(down.containers).toEqual([expect.objectContaining({ containerId: before!.containerId, state: 'exited', exitCode: 137, restartCount: 0 })]);
    expect(seenMs).toBeLessThan(HEARTBEAT_MS + SLACK_MS);

    const running = await statusWhen(serviceId, (s) => s.state === 'running', 'status running again', RESTART_BACKOFF_MS + 5_000);
    const restartedMs = performance.now() - killedAt;
    console.log(`crash: exited on status after ${Math.round(seenMs)} ms, running again after ${Math.round(restartedMs)} ms (backoff ${RESTART_BACKOFF_MS} ms)`);
    // Not before its backoff (no hot restart loop), and soon after it (an event drove it, not the periodic sweep).
    expect(restartedMs).toBeGreaterThanOrEqual(RESTART_BACKOFF_MS - 100);
    expect(restartedMs).toBeLessThan(RESTART_BACKOFF_MS + 2 * HEARTBEAT_MS + 1_000);
    expect(running.containers).toEqual([expect.objectContaining({ containerId: before!.containerId, state: 'running', exitCode: null, restartCount: 1 })]);
    expect(running.evidence?.sessionId).toBe(session.id);
    expect(await viaAlias(agent, serviceId)).toBe(message);
  });

  it('an agent restart adopts the running container (same id, not restarted, no duplicate) and status is 1/1 running on the new session', async () => {
    const { node, agent, session, serviceId, deploymentId, message } = await deployed('adopt');
    const [container] = (await status(serviceId)).containers;
    const inspect = async () => JSON.parse((await dockerApi('GET', `/containers/${container!.containerId}/json`)).body) as { State: { Running: boolean; StartedAt: string } };
    const startedAt = (await inspect()).State.StartedAt;

    await agent.stop();
    // No live session, no claim: the panel reports unknown while the container keeps serving.
    const orphaned = await statusWhen(serviceId, (s) => s.state === 'unknown', 'status unknown without a session', 2_000);
    expect(orphaned).toMatchObject({ runningReplicas: null, evidence: null, containers: [] });
    expect(await viaAlias(agent, serviceId)).toBe(message);

    const restartAt = performance.now();
    await startAgent(node.name, node.token, { stateDir: agent.stateDir });
    const next = await waitFor(
      async () => {
        const live = panel.app.agentSide.registry.get(node.id);
        const s = await status(serviceId);
        return live && live.id !== session.id && s.state === 'running' && s.evidence?.sessionId === live.id ? { live, s } : undefined;
      },
      { timeoutMs: 10_000, intervalMs: 25, message: '1/1 running on a new session' },
    );
    console.log(`agent restart: 1/1 running on the new session ${Math.round(performance.now() - restartAt)} ms after the new process was spawned`);
    expect(next.s).toMatchObject({ runningReplicas: 1, reason: countedReason(panel, 1, 1, next.live.id) });
    expect(next.s.containers).toEqual([expect.objectContaining({ containerId: container!.containerId, state: 'running', restartCount: 0 })]);
    // Give the new agent's reconcile passes time to do something wrong, then check Docker itself.
    await sleep(1_000);
    const filters = encodeURIComponent(JSON.stringify({ label: [`tether.service=${serviceId}`] }));
    const all = JSON.parse((await dockerApi('GET', `/containers/json?all=1&filters=${filters}`)).body) as { Id: string }[];
    expect(all.map((c) => c.Id)).toEqual([container!.containerId]);
    expect((await inspect()).State).toMatchObject({ Running: true, StartedAt: startedAt });
    expect(await viaAlias(agent, serviceId)).toBe(message);
    expect((await deployment(deploymentId)).status).toBe('running');
  });

  it('failed deployments end failed with their reason (unknown image, exits at once, failing health check) while the previous deployment keeps running and serving', async () => {
    const { agent, serviceId, deploymentId, message } = await deployed('failures');
    const [serving] = (await status(serviceId)).containers;

    async function failedDeploy(patch: Record<string, unknown>) {
      expect((await panel.api('PATCH', `/v1/services/${serviceId}`, patch)).status).toBe(200);
      const asked = performance.now();
      const res = await panel.api('POST', `/v1/services/${serviceId}/deployments`, {});
      expectDeployAccepted(panel, res, { serviceId });
      const row = await settled(res.body.id, PULL_TIMEOUT_MS + 10_000);
      const ms = performance.now() - asked;
      // The previous deployment is untouched: its row still running, its container the one serving.
      expect((await deployment(deploymentId)).status).toBe('running');
      // The report status is read from may predate the failure by up to a heartbeat (the failed container still
      // there); the next ones show the old container alone.
      const s = await statusWhen(serviceId, (now) => now.containers.length === 1, 'status without the failed container', 3_000);
      expect(s).toMatchObject({ state: 'running', runningReplicas: 1 });
      expect(s.containers).toEqual([expect.objectContaining({ containerId: serving!.containerId, deploymentId, state: 'running' })]);
      expect(await viaAlias(agent, serviceId)).toBe(message);
      return { row, ms };
    }

    const missing = await failedDeploy({ image: 'tether-test/does-not-exist:1' });
    console.log(`unknown image → failed after ${Math.round(missing.ms)} ms: ${missing.row.reason}`);
    expect(missing.row.status).toBe('failed');
    // Offline (here, CI) Docker Hub does not resolve; online it answers "pull access denied" (REGISTRY_AUTH_FAILED).
    expect(missing.row.reason).toMatch(/^(REGISTRY_UNREACHABLE: registry docker\.io could not be reached|REGISTRY_AUTH_FAILED: registry docker\.io refused) .*tether-test\/does-not-exist:1.*; the registry said: .+/);
    expect(missing.ms).toBeLessThan(PULL_TIMEOUT_MS + 2_000);

    const exits = await failedDeploy({ image, env: { MESSAGE: message, EXIT_CODE: '3' } });
    console.log(`exits at once → failed after ${Math.round(exits.ms)} ms: ${exits.row.reason}`);
    const where = { node: `failures-${process.pid}`, previous: deploymentId };
    expect(exits.row).toMatchObject({ status: 'failed', reason: failureReason(panel, 'CONTAINER_EXITED: exited with code 3; last output: failing on purpose', where) });

    // Docker calls this container running (health: starting) for a while before its probe fails: heartbeats
    // show it running meanwhile, and that must not pass for the agent's verdict.
    const unhealthy = await failedDeploy({ image: healthcheckImage, env: { MESSAGE: message, UNHEALTHY: '1' } });
    console.log(`failing health check → failed after ${Math.round(unhealthy.ms)} ms: ${unhealthy.row.reason}`);
    expect(unhealthy.row).toMatchObject({ status: 'failed', reason: failureReason(panel, 'HEALTHCHECK_FAILED: health check failed: exit 1: probe says unhealthy', where) });
  });

  describe.skipIf(!daemonSupport.available)('the Docker daemon goes away (a private second dockerd, stopped for real)', () => {
    it('status reads unknown with "container runtime unavailable on node …" on the same live session, and 1/1 running again once the daemon is back', async () => {
      const daemon = secondDaemon(`e2e-${process.pid}`);
      cleanups.push(() => daemon.destroy());
      await daemon.start();
      await daemon.loadImages([image]);
      const { node, session, serviceId } = await deployed('nodaemon', { env: { DOCKER_HOST: daemon.dockerHost } });
      const [before] = (await status(serviceId)).containers;

      await daemon.stop();
      const stoppedAt = performance.now();
      const unknown = await statusWhen(serviceId, (s) => s.state === 'unknown', 'status unknown with the daemon stopped', 5_000, 10);
      const unknownMs = performance.now() - stoppedAt;
      expect(unknown.reason).toMatch(new RegExp(`^container runtime unavailable on node ${node.name}: docker is unreachable \\(list containers\\)`));
      // The session is kept (the panel still hears the agent); only the runtime is unknown, and no container is claimed.
      expect(unknown).toMatchObject({ runningReplicas: null, containers: [], evidence: { sessionId: session.id } });
      expect(unknown.evidence!.lastFrameAgeMs).toBeLessThan(HEARTBEAT_MS + SLACK_MS);
      expect(panel.app.agentSide.registry.get(node.id)?.id).toBe(session.id);
      const row = (await panel.api('GET', '/v1/sessions')).body.sessions.find((r: { nodeId: string }) => r.nodeId === node.id);
      expect(row).toMatchObject({ state: 'connected', sessionId: session.id, runtime: { available: false } });
      // Stopping takes a while (the daemon stops its containers first); the heartbeat right after it is gone must say so.
      expect(unknownMs).toBeLessThan(HEARTBEAT_MS + SLACK_MS);

      await daemon.start();
      const backAt = performance.now();
      const running = await statusWhen(serviceId, (s) => s.state === 'running', 'status running after the daemon came back', 15_000);
      const backMs = performance.now() - backAt;
      console.log(`daemon stopped → status unknown after ${Math.round(unknownMs)} ms; daemon answering again → 1/1 running after ${Math.round(backMs)} ms`);
      expect(running.evidence?.sessionId).toBe(session.id);
      // The daemon's stop killed the container; the agent started the same one again (no new container).
      expect(running.containers).toEqual([expect.objectContaining({ containerId: before!.containerId, state: 'running' })]);
    });
  });
});
