import { afterEach, describe, expect, it } from 'vitest';
import { CAPABILITIES, DEFAULT_TIMING, type AllocationStatus, type AllocationsStatus, type Hello } from '@tether/protocol';
import type { AnswererHealth, RoutingController, WorkloadController } from '../../src/controllers.js';
import type { PanelConnection } from '../../src/connection/panel-connection.js';
import { agentCapabilities, remoteRoutingAddress } from '../../src/connection/handshake.js';
import { DisabledRouting, UnavailableWorkloads } from '../../src/null-controllers.js';
import { FakePanel, testConnection } from './fake-panel.js';

// Capability routing.remote over a real WebSocket against a scripted panel: announced (with hello's
// privateAddress) only with a private address, allocations and the static proxy's answerer; allocations.status
// carries `endpoint` only on a session whose welcome named the capability back.

const health: AnswererHealth = { up: true, starts: 1, restarts: 0, lastFailure: null, lastFailureAt: null, unserved: 0, legacy: 0 };
const withAnswerer = (): RoutingController => Object.assign(new DisabledRouting(), { answerer: () => health });

const status: AllocationStatus = {
  allocationId: 'alc-1', serviceId: 'svc_1', deploymentId: 'dep_1', runningDeploymentId: 'dep_1', state: 'running',
  containerId: 'c1', health: 'healthy', code: null, reason: null, since: '2026-12-04T00:00:00.000Z', endpoint: '10.20.0.7:32768',
};

/** Runs allocations, publishing on 10.20.0.7 (what DockerWorkloadController does with TETHER_PRIVATE_ADDRESS). */
function allocatingWorkloads(privateAddress?: string): WorkloadController {
  const listeners = new Set<() => void>();
  let set = false;
  return Object.assign(new UnavailableWorkloads(), {
    capabilities: [CAPABILITIES.WORKLOAD_ALLOCATIONS],
    ...(privateAddress ? { privateAddress } : {}),
    setAllocations: () => {
      set = true;
      for (const l of listeners) l();
    },
    allocationStatus: () => (set ? [status] : null),
    onAllocationStatus: (l: () => void) => (listeners.add(l), () => listeners.delete(l)),
  });
}

describe('routing.remote in hello', () => {
  it('announced with the private address only when allocations, the address and the answerer are all there', () => {
    const all = { routing: withAnswerer(), workloads: allocatingWorkloads('10.20.0.7') };
    expect(remoteRoutingAddress(all)).toBe('10.20.0.7');
    expect(agentCapabilities(all)).toContain(CAPABILITIES.ROUTING_REMOTE);
    for (const parts of [
      { routing: new DisabledRouting(), workloads: allocatingWorkloads('10.20.0.7') },
      { routing: withAnswerer(), workloads: allocatingWorkloads() },
      { routing: withAnswerer(), workloads: Object.assign(new UnavailableWorkloads(), { privateAddress: '10.20.0.7' }) },
    ]) {
      expect(remoteRoutingAddress(parts)).toBeNull();
      expect(agentCapabilities(parts)).not.toContain(CAPABILITIES.ROUTING_REMOTE);
    }
  });
});

describe('routing.remote over the session', () => {
  const panel = new FakePanel();
  let connection: PanelConnection | undefined;
  afterEach(async () => {
    await connection?.stop();
    await panel.stop();
  });

  it('endpoint goes only to a panel that named the capability back', async () => {
    panel.autoWelcome = null;
    connection = testConnection(await panel.start(), { workloads: allocatingWorkloads('10.20.0.7'), routing: withAnswerer(), reconnect: { minMs: 20, maxMs: 50, healthySessionMs: 300, connectTimeoutMs: 1_000 } });
    connection.start();
    const session = async (n: number, capabilities: string[]) => {
      const conn = await panel.waitForConnection(n);
      const hello = await conn.waitFor<Hello>((m) => m.type === 'hello');
      expect(hello.capabilities).toContain(CAPABILITIES.ROUTING_REMOTE);
      expect(hello.privateAddress).toBe('10.20.0.7');
      conn.send({ type: 'welcome', id: `w${n}`, ref: hello.id, sessionId: `ses_${n}`, nodeId: 'node_1', timing: DEFAULT_TIMING, capabilities });
      conn.send({ type: 'allocations', id: `pal_${n}`, releases: [], allocations: [] });
      return (await conn.waitFor<AllocationsStatus>((m) => m.type === 'allocations.status' && m.ref === `pal_${n}`)).allocations;
    };
    expect(await session(1, [CAPABILITIES.WORKLOAD_ALLOCATIONS, CAPABILITIES.ROUTING_REMOTE])).toEqual([status]);
    panel.connections[0]!.socket.terminate();
    const without = await session(2, [CAPABILITIES.WORKLOAD_ALLOCATIONS]);
    const { endpoint: _endpoint, ...rest } = status;
    expect(without).toEqual([rest]);
    expect('endpoint' in without[0]!).toBe(false);
  });
});
