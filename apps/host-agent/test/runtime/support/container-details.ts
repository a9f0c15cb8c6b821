import type { ContainerDetails } from '../../../src/runtime/container-runtime.js';

/** A running container's details as the runtime reports them; `over` changes any field. */
export const containerDetails = (id: string, over: Partial<ContainerDetails> = {}): ContainerDetails => ({
  id,
  name: `c-${id}`,
  labels: {},
  state: 'running',
  exitCode: null,
  oomKilled: false,
  error: null,
  health: 'none',
  lastHealthOutput: null,
  restartCount: 0,
  createdAt: '2026-11-29T10:00:00.000Z',
  startedAt: '2026-11-29T10:00:01.000Z',
  finishedAt: null,
  hasHealthcheck: false,
  ...over,
});
