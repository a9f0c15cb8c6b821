import type { ContainerState } from '@tether/protocol';

// The notes a status reason carries about a node's containers (OOM kills with
// their restart counts, failing health checks with their last probe), written
// once here for both the single-node answer (service-status.ts) and the answer
// of a service managed by allocations (replica-status.ts).

/** Running containers whose health check fails, named with the code and their last probe (capability `workload.healthCheck`). */
export function unhealthyNote(containers: ContainerState[]): string {
  const sick = containers.filter((c) => c.state === 'running' && c.health === 'unhealthy');
  if (sick.length === 0) return '';
  const probe = (c: ContainerState) => {
    const p = c.lastProbe;
    if (!p) return '';
    return ` (last probe at ${p.at}: ${p.status === null ? 'no answer' : `status ${p.status}`}${p.error ? `, ${p.error}` : ''}, ${p.latencyMs} ms)`;
  };
  return `; HEALTHCHECK_FAILED: ${sick.map((c) => `${c.name} is unhealthy${probe(c)}`).join(', ')}`;
}

/** Containers whose last exit was an OOM kill, named in the reason with the code and their restart counts. */
export function oomNote(containers: ContainerState[]): string {
  const killed = containers.filter((c) => c.oomKilled === true);
  if (killed.length === 0) return '';
  return `; OOM_KILLED: ${killed.map((c) => `${c.name} was killed for exceeding its memory limit (restartCount ${c.restartCount})`).join(', ')}`;
}
