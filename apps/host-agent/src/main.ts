import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type Docker from 'dockerode';
import type { Logger } from 'pino';
import { createAgent, type Agent } from './agent.js';
import { runMain } from '@tether/common';
import { createLogger } from '@tether/common/logging';
import { loadConfig, type AgentConfig } from './config.js';
import { startHealthFile } from './health-file.js';
import { startAgentMetrics } from './metrics/index.js';
import type { RoutingController, WorkloadController } from './controllers.js';
import { UnavailableWorkloads } from './null-controllers.js';
import { EventJournal, createRoutingController, reloadEvent } from './proxy/index.js';
import { createDockerWorkloadController } from './runtime/index.js';
import { createDockerClient } from './docker/docker-client.js';
import { NetworkIsolation, elsewhere, hostCommands } from './docker/isolation.js';
import { DockerLogSource, LogStreams } from './logs/index.js';
import { createCanary, withCanary, type Canary } from './canary/index.js';
import { probeTarget, withRouteProbes } from './route-probes/index.js';

// Reads configuration, builds the controllers the config asks for and starts the agent.

function controllers(
  docker: Docker,
  config: AgentConfig,
  nodeName: string,
  logger: Logger,
  agent: () => Agent | undefined,
  journal: EventJournal | undefined,
  canary: Canary | null,
  proxyAddress: (resolve: () => Promise<string | null>) => void,
  proxyAddressOf: () => Promise<string | null>,
  isolation: NetworkIsolation | null,
): { workloads: WorkloadController; routing: RoutingController; logs?: LogStreams } {
  // The routing controller is made after the workloads, which read its drain side only when a drain needs it.
  const proxy: { routing?: RoutingController } = {};
  const workloads: WorkloadController =
    config.runtime.kind === 'none'
      ? new UnavailableWorkloads()
      : createDockerWorkloadController(docker, config.runtime, nodeName, {
          logger,
          restartCountersFile: path.join(config.stateDir, 'restart-counters.json'),
          pendingRemovalsFile: path.join(config.stateDir, 'volume-removals.json'),
          privateImagesFile: path.join(config.stateDir, 'private-images.json'),
          drainsFile: path.join(config.stateDir, 'drains.json'),
          allocationsFile: path.join(config.stateDir, 'allocations.json'),
          allocationDrainsFile: path.join(config.stateDir, 'allocation-drains.json'),
          privateAddress: config.remote.privateAddress,
          ...(isolation ? { onRuntimeReconnect: () => void isolation.trigger() } : {}),
          traffic: () => proxy.routing?.traffic,
          onDrained: (report) => agent()?.connection.reportDrained(report),
          // A container that crashed past its restart budget fails its deployment, visibly, on the panel.
          onFailure: (report) => agent()?.connection.reportResult(report.deploymentId, { status: 'failed', code: report.code, reason: report.reason }),
        });
  const routing = (proxy.routing = createRoutingController(
    config,
    {
      logger,
      docker,
      // Every reload, also those of the periodic proxy check, goes to the panel's history exactly once,
      // and is the evidence the canary attributes its drops with.
      onReload: (reload) => {
        canary?.noteReload(reload);
        void journal?.record(reloadEvent(reload));
      },
      proxyAddress,
      ...(workloads.notServing ? { notServing: workloads.notServing.bind(workloads) } : {}),
    },
  ));
  // Logs are read straight from Docker (not through the runtime seam): a long-lived stream per follower.
  const logs =
    config.runtime.kind === 'none'
      ? undefined
      : new LogStreams({ source: new DockerLogSource(docker, nodeName), logger, maxStreams: config.logs.maxStreams });
  const probed = withRouteProbes(routing, config, { logger, target: probeTarget(config, proxyAddressOf) });
  return { workloads, routing: withCanary(probed, canary), ...(logs ? { logs } : {}) };
}

runMain(
  () => loadConfig(process.env),
  async (config) => {
    const logger = createLogger({ level: config.logLevel, format: config.logFormat });
    const { nodeName } = config;
    const ref: { agent?: Agent } = {};
    const journal = config.proxy.kind === 'none' ? undefined : await EventJournal.open(path.join(config.stateDir, 'proxy-events.json'), { logger });
    // Container mode: the canary finds Caddy at its container's address, which the routing controller knows how to read.
    const proxy: { address?: () => Promise<string | null> } = {};
    const canary = await createCanary(
      config,
      { logger, onDrop: (event) => void journal?.record(event), ...(config.proxy.kind === 'container' ? { proxyAddress: () => proxy.address?.() ?? Promise.resolve(null) } : {}) },
    );
    // The one Docker client of the process (it connects per call: making it costs no I/O, also when unused).
    const docker = createDockerClient(config.runtime.dockerHost);
    // Cross-node routing publishes allocation ports on the private address: containers' own addresses stay unreachable from other hosts.
    const isolation =
      config.remote.privateAddress !== null && config.runtime.kind === 'docker'
        ? new NetworkIsolation({
            docker,
            network: config.runtime.network,
            run: config.runtime.dockerHost?.startsWith('tcp:') ? elsewhere(config.runtime.dockerHost) : hostCommands(config.runtime.timing.callTimeoutMs),
            intervalMs: config.runtime.timing.sweepIntervalMs,
            logger,
          })
        : null;
    const parts = controllers(docker, config, nodeName, logger, () => ref.agent, journal, canary, (resolve) => (proxy.address = resolve), () => proxy.address?.() ?? Promise.resolve(null), isolation);
    const agent = createAgent(config, { logger, ...parts, ...(journal ? { events: journal } : {}) });
    ref.agent = agent;
    logger.info({ panels: config.panelUrls, node: nodeName, runtime: config.runtime.kind, proxy: config.proxy.kind }, 'tether agent starting');
    await mkdir(config.stateDir, { recursive: true });
    const session: { id: string | null } = { id: null };
    agent.connection.on('ready', ({ sessionId }) => (session.id = sessionId));
    agent.connection.on('closed', () => (session.id = null));
    // Static routing: the answerer's state too (what an operator reads first when routes answer no-upstream).
    const health = () => ({ connection: agent.connection.state, sessionId: session.id, ...(parts.routing.answerer ? { answerer: parts.routing.answerer() } : {}) });
    const stopHealth = startHealthFile(config.stateDir, health);
    const { workloads } = parts;
    const drains = workloads.drainStats?.bind(workloads);
    const metrics = config.metrics ? await startAgentMetrics(config.metrics, agent, parts.routing, health, logger, drains) : undefined;
    isolation?.start();
    await agent.start();
    return {
      async stop(signal) {
        logger.info({ signal }, 'agent stopping');
        stopHealth();
        await metrics?.close();
        await isolation?.stop();
        await agent.stop();
      },
    };
  },
);
