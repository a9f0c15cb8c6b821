import type Docker from 'dockerode';
import { DockerContainerRuntime } from './docker-runtime.js';
import type { ContainerLogOptions, RestartPolicy, RuntimeTiming } from './settings.js';
import { DockerWorkloadController, type DockerWorkloadControllerOptions } from './docker-workload-controller.js';

export { DockerWorkloadController, type DockerWorkloadControllerOptions } from './docker-workload-controller.js';
export { DockerContainerRuntime } from './docker-runtime.js';
export type { ContainerRuntime } from './container-runtime.js';
export { RUNTIME_ERROR_CODES, RuntimeError, type RuntimeErrorCode } from './errors.js';
export type { ContainerFailure } from './executor.js';
export { plan, type Action, type ActualContainer, type PlanContext } from './plan.js';
export { DEFAULT_RESTART_POLICY, DEFAULT_RUNTIME_TIMING, type RestartPolicy, type RuntimeTiming } from './settings.js';

/** What the workloads take of the agent's configuration (its `runtime` settings). */
export interface RuntimeSettings {
  network: string;
  timing: Partial<RuntimeTiming> & Pick<RuntimeTiming, 'callTimeoutMs'>;
  restart: Partial<RestartPolicy>;
  containerLogs: ContainerLogOptions;
  volumes: { scanIntervalMs: number; measureIntervalMs: number };
}

/** The agent's WorkloadController for TETHER_RUNTIME=docker, built from its runtime settings, on the process's one Docker client. */
export function createDockerWorkloadController(
  docker: Docker,
  config: RuntimeSettings,
  node: string,
  options: Pick<
    DockerWorkloadControllerOptions,
    | 'logger'
    | 'onFailure'
    | 'restartCountersFile'
    | 'pendingRemovalsFile'
    | 'privateImagesFile'
    | 'drainsFile'
    | 'traffic'
    | 'onDrained'
    | 'allocationsFile'
    | 'allocationDrainsFile'
    | 'privateAddress'
    | 'onRuntimeReconnect'
  > = {},
): DockerWorkloadController {
  const runtime = new DockerContainerRuntime(docker, { callTimeoutMs: config.timing.callTimeoutMs, containerLogs: config.containerLogs });
  return new DockerWorkloadController({
    runtime,
    node,
    network: config.network,
    timing: config.timing,
    restart: config.restart,
    volumeInventory: config.volumes,
    ...options,
  });
}
