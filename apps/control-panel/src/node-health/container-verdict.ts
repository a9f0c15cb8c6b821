import type { ContainerState } from '@tether/protocol';

// What a reported container counts as, decided once. Two questions, two
// answers, both here so no presenter invents a third:
// - up: Docker runs it and no health check says it fails. Status, the fleet
//   page and the per-node metrics count these as running replicas.
// - ready: up, and no health check is still pending either. A deployment
//   that a heartbeat settles reaches `running` only on this, because a
//   container whose check has not passed yet may still fail it.

export function containerUp(c: Pick<ContainerState, 'state' | 'health'>): boolean {
  return c.state === 'running' && c.health !== 'unhealthy';
}

export function containerReady(c: Pick<ContainerState, 'state' | 'health'>): boolean {
  return containerUp(c) && c.health !== 'starting';
}

/** Up containers of one service among a node's reported containers. */
export function upReplicas(containers: readonly ContainerState[], serviceId: string): number {
  let n = 0;
  for (const c of containers) if (c.serviceId === serviceId && containerUp(c)) n++;
  return n;
}
