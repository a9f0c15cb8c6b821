import { describe, expect, it } from 'vitest';
import { CLOSE_CODES } from '@tether/protocol';
import { containerReady, containerUp, upReplicas } from '../src/node-health/container-verdict.js';
import { clusterProof, nodeHealth, type HealthSources, type NodeFacts } from '../src/node-health/node-health.js';
import type { RemoteReport } from '../src/sessions/remote-report.js';
import type { Teardown } from '../src/sessions/registry.js';
import type { AgentSession } from '../src/sessions/session.js';

// The one place a node's state is decided, without I/O: every presenter
// (REST rows, status, fleet rows, metrics) reads what this returns.

const facts = (over: Partial<NodeFacts> = {}): NodeFacts => ({
  id: 'n1',
  name: 'node-1',
  decommissioned: false,
  lastSeenAt: null,
  unreachableSince: null,
  lastTeardownAt: null,
  lastTeardownReason: null,
  lastCloseCode: null,
  ...over,
});

const session = { id: 'ses_1', nodeId: 'n1' } as unknown as AgentSession;

function sources(opts: { live?: boolean; teardown?: Teardown; cluster?: HealthSources['cluster'] } = {}): HealthSources {
  return {
    registry: {
      get: (id: string) => (opts.live && id === 'n1' ? session : undefined),
      lastTeardown: (id: string) => (id === 'n1' ? opts.teardown : undefined),
    },
    ...(opts.cluster ? { cluster: opts.cluster } : {}),
  };
}

const remote = (over: Partial<RemoteReport> = {}): RemoteReport => ({
  nodeId: 'n1',
  panelId: 'panel-b',
  sessionId: 'ses_b',
  generation: 3,
  state: 'connected',
  lastFrameAt: 1_000,
  updatedAt: 1_000,
  containers: [],
  runtime: null,
  routing: null,
  extra: { peer: null, agentVersion: null, openedAt: null, heartbeats: 0, missedAcks: 0 },
  live: true,
  internalUrl: null,
  source: 'report-row',
  ...over,
});

describe('node health', () => {
  it('is connected only while a live session of this panel proves it', () => {
    expect(nodeHealth(facts({ lastSeenAt: 5 }), sources({ live: true }))).toMatchObject({ state: 'connected', local: session, remote: null });
    expect(nodeHealth(facts({ lastSeenAt: 5 }), sources())).toMatchObject({ state: 'unreachable', local: null });
    expect(nodeHealth(facts(), sources())).toMatchObject({ state: 'never_connected', unreachableSince: null });
  });

  it('a decommissioned node is never connected, whatever session it still has', () => {
    expect(nodeHealth(facts({ decommissioned: true }), sources({ live: true }))).toMatchObject({ state: 'decommissioned', local: null });
  });

  it('the last teardown this panel saw wins over the database row, and dates the unreachability', () => {
    const teardown: Teardown = { nodeId: 'n1', sessionId: 'ses_0', code: CLOSE_CODES.IDLE_TIMEOUT, reason: 'idle', at: 900 };
    const fromMemory = nodeHealth(facts({ lastTeardownAt: 100, lastTeardownReason: 'old', lastCloseCode: CLOSE_CODES.ACK_TIMEOUT, unreachableSince: 100 }), sources({ teardown }));
    expect(fromMemory).toMatchObject({ state: 'unreachable', unreachableSince: 900, teardown: { at: 900, reason: 'idle', code: CLOSE_CODES.IDLE_TIMEOUT } });
    const fromRow = nodeHealth(facts({ lastTeardownAt: 100, lastTeardownReason: 'old', lastCloseCode: CLOSE_CODES.ACK_TIMEOUT, unreachableSince: 100 }), sources());
    expect(fromRow).toMatchObject({ state: 'unreachable', unreachableSince: 100, teardown: { at: 100, reason: 'old', code: CLOSE_CODES.ACK_TIMEOUT } });
  });

  it('a panel without its lease proves nothing from its own sessions; another live panel does', () => {
    const none = clusterProof({ panelId: 'panel-a', leaseHeld: false, remote: new Map() });
    expect(nodeHealth(facts({ lastSeenAt: 5 }), sources({ live: true, cluster: none }))).toMatchObject({ state: 'unreachable', local: null, leaseLost: true });
    const other = clusterProof({ panelId: 'panel-a', leaseHeld: true, remote: new Map([['n1', remote()]]) });
    expect(nodeHealth(facts({ lastSeenAt: 5 }), sources({ cluster: other }))).toMatchObject({ state: 'connected', remote: { sessionId: 'ses_b' } });
    // Its own session comes first.
    expect(nodeHealth(facts({ lastSeenAt: 5 }), sources({ live: true, cluster: other }))).toMatchObject({ state: 'connected', local: session, remote: null });
  });

  it('another panel’s report proves nothing once its lease lapsed, its session closed, or it is this panel’s own row', () => {
    for (const r of [remote({ live: false }), remote({ state: 'closed' }), remote({ panelId: 'panel-a' })]) {
      const view = clusterProof({ panelId: 'panel-a', leaseHeld: true, remote: new Map([['n1', r]]) });
      expect(nodeHealth(facts({ lastSeenAt: 5 }), sources({ cluster: view })).state).toBe('unreachable');
    }
  });
});

describe('container verdict', () => {
  const c = (state: string, health: string, serviceId = 's1') => ({ serviceId, state, health }) as never;
  it('up: running and not failing its check; ready: up and not still starting', () => {
    expect([containerUp(c('running', 'none')), containerUp(c('running', 'starting')), containerUp(c('running', 'unhealthy')), containerUp(c('exited', 'none'))]).toEqual([true, true, false, false]);
    expect([containerReady(c('running', 'healthy')), containerReady(c('running', 'starting')), containerReady(c('running', 'unhealthy'))]).toEqual([true, false, false]);
    expect(upReplicas([c('running', 'none'), c('running', 'unhealthy'), c('running', 'none', 's2')], 's1')).toBe(1);
  });
});
