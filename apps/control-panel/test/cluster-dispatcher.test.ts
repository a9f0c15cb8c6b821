import { describe, expect, it, vi } from 'vitest';
import { silentLogger } from '@tether/common';
import type { Db } from '../src/db/database.js';
import { AppError } from '../src/errors.js';
import { ClusterDispatcher } from '../src/cluster/cluster-dispatcher.js';
import type { PanelLease } from '../src/cluster/panel-lease.js';
import type { PanelSignals } from '../src/cluster/panel-signals.js';
import type { SessionRegistry } from '../src/sessions/registry.js';
import type { DeploymentDispatcher, DispatchRequest } from '../src/dispatch/session-dispatcher.js';
import type { SessionStore } from '../src/session-writes/session-store.js';

// The dispatcher between panels with its collaborators stubbed (the real
// thing runs in multi-panel.test.ts): which signals it sends and which rows
// it reads, since every read and signal is a round trip on a cross-panel
// deploy's path (issue 10).

const request: DispatchRequest = {
  deploymentId: 'dep-1',
  nodeId: 'node-1',
  nodeName: 'n1',
  workload: { serviceId: 's1', serviceName: 'svc', deploymentId: 'dep-1', image: 'x:1', env: {}, port: null, replicas: 1 },
};
const pendingRow = { id: 'dep-1', service_id: 's1', node_id: 'node-1', name: 'n1', spec: { name: 'svc', image: 'x:1', env: {}, internalPort: null, replicas: 1 } };

function setup(row: { status: string; reason: string | null } = { status: 'delivered', reason: null }) {
  const findUnique = vi.fn(async () => row);
  const pending = vi.fn(async () => [pendingRow]);
  const send = vi.fn(async () => {});
  const local = { dispatch: vi.fn<DeploymentDispatcher['dispatch']>(async () => ({ httpStatus: 202 as const })) };
  const dispatcher = new ClusterDispatcher({
    local,
    registry: { get: () => undefined, list: () => [] } as unknown as SessionRegistry,
    lease: { mayServe: true, panelId: 'panel-a' } as unknown as PanelLease,
    signals: { askOwner: async () => 'panel-b', send } as unknown as PanelSignals,
    prisma: { deployment: { findUnique, updateMany: vi.fn() }, $queryRawUnsafe: pending } as unknown as Db,
    store: {} as SessionStore,
    ackTimeoutMs: 1_000,
    logger: silentLogger,
  });
  return { dispatcher, findUnique, send, local };
}

describe('dispatch across panels', () => {
  it('the owner answering `delivered` is a 202 without reading the row', async () => {
    const { dispatcher, findUnique } = setup();
    const answer = dispatcher.dispatch(request);
    await vi.waitFor(() => expect((dispatcher as unknown as { waiters: Map<string, unknown> }).waiters.has('dep-1')).toBe(true));
    dispatcher.answered('dep-1', 'delivered');
    await expect(answer).resolves.toEqual({ httpStatus: 202 });
    expect(findUnique).not.toHaveBeenCalled();
  });

  it('an answer without an outcome (an owner of the previous version, or a failed send): the row decides', async () => {
    const { dispatcher, findUnique } = setup({ status: 'ack_timeout', reason: 'no ACK' });
    const answer = dispatcher.dispatch(request);
    await vi.waitFor(() => expect((dispatcher as unknown as { waiters: Map<string, unknown> }).waiters.has('dep-1')).toBe(true));
    dispatcher.answered('dep-1');
    await expect(answer).rejects.toMatchObject({ code: 'ACK_TIMEOUT' });
    expect(findUnique).toHaveBeenCalledTimes(1);
  });

  it('the owner names the outcome only when its send was ACKed, and sends a deployment once when asked twice at once', async () => {
    const { dispatcher, send, local } = setup();
    await Promise.all([dispatcher.requested('dep-1'), dispatcher.requested('dep-1')]);
    expect(local.dispatch).toHaveBeenCalledTimes(1);
    expect(send.mock.calls).toEqual([['deployed', 'panel-a', ['dep-1/delivered', 'dep-1']]]);

    local.dispatch.mockRejectedValueOnce(new AppError('ACK_TIMEOUT', 'no ACK'));
    await dispatcher.requested('dep-1');
    expect(send.mock.calls[1]).toEqual(['deployed', 'panel-a', ['dep-1']]);
  });
});
