import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type Docker from 'dockerode';
import type { Logger } from '@tether/common';
import { createAgent, type Agent } from './agent.js';
import type { AgentConfig } from './config.js';
import type { RoutingController, WorkloadController } from './controllers.js';
import { startHealthFile } from './health-file.js';
import { startAgentMetrics } from './metrics/index.js';
import { UnavailableWorkloads } from './null-controllers.js';
import { EventJournal, createRoutingController, proxyAddressReader, reloadEvent } from './proxy/index.js';
import { createDockerWorkloadController } from './runtime/index.js';
import { NetworkIsolation, elsewhere, hostCommands } from './docker/isolation.js';
import { DockerLogSource, LogStreams } from './logs/index.js';
import { createCanary, withCanary } from './canary/index.js';
import { probeTarget, withRouteProbes } from './route-probes/index.js';
import { TrafficChannel } from './traffic-channel.js';

// How the agent is put together (docs/architecture.md, "Host agent"). Every part is made from parts made before
// it, so nothing is assigned after construction; the one edge that points back (a drain asks the proxy, which
// is made after the workloads) goes through TrafficChannel. The parts with a start and a stop are one list:
// its order is the start order, its reverse the stop order.

/** What stops a part that started. */
type Stop = () => unknown;

/** A part of the agent: starting it gives what stops it. */
interface Part {
  name: string;
  start(): Promise<Stop> | Stop;
}

/** The agent's parts in start order; stop() stops those started, in reverse. */
export interface ComposedAgent {
  agent: Agent;
  parts: readonly string[];
  start(): Promise<void>;
  stop(): Promise<void>;
}

/** `docker`: the process's one Docker client (main.ts makes it; it connects per call, so making it costs no I/O). */
export async function composeAgent(config: AgentConfig, logger: Logger, docker: Docker): Promise<ComposedAgent> {
  const journal = config.proxy.kind === 'none' ? undefined : await EventJournal.open(path.join(config.stateDir, 'proxy-events.json'), { logger });
  // Container mode: the canary and the route probes find Caddy at its container's address.
  const proxyAddress = proxyAddressReader(config, docker);
  const canary = await createCanary(config, { logger, onDrop: (event) => void journal?.record(event), ...(proxyAddress ? { proxyAddress } : {}) });
  const isolation = networkIsolation(config, docker, logger);
  const traffic = new TrafficChannel();
  const workloads = workloadsFor(config, docker, logger, traffic, isolation);
  const inner = createRoutingController(config, {
    logger,
    docker,
    // Every reload, also those of the periodic proxy check, goes to the panel's history exactly once,
    // and is the evidence the canary attributes its drops with.
    onReload: (reload) => {
      canary?.noteReload(reload);
      void journal?.record(reloadEvent(reload));
    },
    ...(workloads.notServing ? { notServing: workloads.notServing.bind(workloads) } : {}),
  });
  traffic.answerFrom(inner.traffic);
  // Layers around the routing controller: the outermost starts last and stops first (routing-layer.ts).
  const routing: RoutingController = withCanary(withRouteProbes(inner, config, { logger, target: probeTarget(config, proxyAddress) }), canary);
  // Logs are read straight from Docker (not through the runtime seam): a long-lived stream per follower.
  const logs = config.runtime.kind === 'none' ? undefined : new LogStreams({ source: new DockerLogSource(docker, config.nodeName), logger, maxStreams: config.logs.maxStreams });
  const agent = createAgent(config, { logger, workloads, routing, ...(logs ? { logs } : {}), ...(journal ? { events: journal } : {}) });
  // Static routing: the answerer's state too (what an operator reads first when routes answer no-upstream).
  const health = () => ({ connection: agent.connection.state, sessionId: agent.connection.currentSessionId, ...(routing.answerer ? { answerer: routing.answerer() } : {}) });
  const parts: Part[] = [
    { name: 'state dir', start: async () => (await mkdir(config.stateDir, { recursive: true }), () => undefined) },
    { name: 'health file', start: () => startHealthFile(config.stateDir, health) },
    {
      name: 'metrics',
      async start() {
        const metrics = config.metrics ? await startAgentMetrics(config.metrics, agent, routing, health, logger, workloads.drainStats?.bind(workloads)) : undefined;
        return () => metrics?.close();
      },
    },
    { name: 'network isolation', start: () => (isolation?.start(), () => isolation?.stop()) },
    // Decommission guard, workloads, routing (its layers last), then the panel session; stopped the other way round.
    { name: 'agent', start: async () => (await agent.start(), () => agent.stop()) },
  ];
  return { agent, parts: parts.map((p) => p.name), ...lifecycle(parts, logger) };
}

/** Starts `parts` in order; stop() stops the started ones in reverse, each even when one before it failed. */
function lifecycle(parts: readonly Part[], logger: Logger): { start(): Promise<void>; stop(): Promise<void> } {
  const started: { name: string; stop: Stop }[] = [];
  return {
    async start() {
      for (const part of parts) started.push({ name: part.name, stop: await part.start() });
    },
    async stop() {
      for (const part of started.splice(0).reverse()) {
        try {
          await part.stop();
        } catch (err) {
          logger.error({ err, part: part.name }, 'an agent part failed to stop');
        }
      }
    },
  };
}

/** Cross-node routing publishes allocation ports on the private address: containers' own addresses stay unreachable from other hosts. */
function networkIsolation(config: AgentConfig, docker: Docker, logger: Logger): NetworkIsolation | null {
  if (config.remote.privateAddress === null || config.runtime.kind !== 'docker') return null;
  const { dockerHost, network, timing } = config.runtime;
  return new NetworkIsolation({
    docker,
    network,
    run: dockerHost?.startsWith('tcp:') ? elsewhere(dockerHost) : hostCommands(timing.callTimeoutMs),
    intervalMs: timing.sweepIntervalMs,
    logger,
  });
}

function workloadsFor(config: AgentConfig, docker: Docker, logger: Logger, traffic: TrafficChannel, isolation: NetworkIsolation | null): WorkloadController {
  if (config.runtime.kind === 'none') return new UnavailableWorkloads();
  const state = (file: string) => path.join(config.stateDir, file);
  return createDockerWorkloadController(docker, config.runtime, config.nodeName, {
    logger,
    restartCountersFile: state('restart-counters.json'),
    pendingRemovalsFile: state('volume-removals.json'),
    privateImagesFile: state('private-images.json'),
    drainsFile: state('drains.json'),
    allocationsFile: state('allocations.json'),
    allocationDrainsFile: state('allocation-drains.json'),
    privateAddress: config.remote.privateAddress,
    ...(isolation ? { onRuntimeReconnect: () => void isolation.trigger() } : {}),
    traffic: traffic.traffic,
  });
}
