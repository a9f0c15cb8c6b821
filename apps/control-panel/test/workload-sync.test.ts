import { describe, expect, it } from 'vitest';
import { silentLogger } from '@tether/common';
import type { PanelMessage, Workload } from '@tether/protocol';
import { PanelEvents } from '../src/panel-events.js';
import type { SessionRegistry } from '../src/sessions/registry.js';
import type { AgentSession } from '../src/sessions/session.js';
import { SessionDispatcher } from '../src/dispatch/session-dispatcher.js';
import type { DesiredWorkloads, SessionStore } from '../src/session-writes/session-store.js';
import { WorkloadSync, withSentDeploys } from '../src/dispatch/workload-sync.js';

// A node's desired set read from the database can be older than a deploy
// already sent on its session (the read started first, or the deployment's
// delivery had not committed): the agent removes whatever the set leaves out,
// so a set must never go out without the deploys sent before it. Found in CI:
// a service created while another was being deployed made the agent remove the
// deployed one's container right after its rollout (e2e-logs).

const workload = (serviceId: string, deploymentId: string, serviceName = serviceId): Workload => ({
  serviceId,
  serviceName,
  deploymentId,
  image: 'busybox',
  env: {},
  port: 8080,
  replicas: 1,
});

/** A store whose desired-set reads stay in flight until the test answers them. */
function heldStore() {
  const reads: ((read: DesiredWorkloads) => void)[] = [];
  const store = {
    desiredWorkloads: () => new Promise<DesiredWorkloads>((resolve) => reads.push(resolve)),
    deploymentDispatched: async () => {},
    deploymentDelivered: async () => {},
    deploymentFinished: async () => true,
  } as unknown as SessionStore;
  return { store, reads };
}

/** A session that ACKs at once and records what was sent on it, in order. */
function recordingSession(nodeId = 'n1') {
  const sent: PanelMessage[] = [];
  const session = {
    id: 'ses_1',
    nodeId,
    nodeName: nodeId,
    closed: false,
    // An agent that announced no capability (the workloads here need none).
    hasCapability: () => false,
    sendAwaitingAck: async (message: PanelMessage) => void sent.push(message),
  } as unknown as AgentSession;
  return { session, sent };
}

const settle = () => new Promise((resolve) => setImmediate(resolve));

function wire() {
  const { store, reads } = heldStore();
  const { session, sent } = recordingSession();
  const registry = { get: (nodeId: string) => (nodeId === session.nodeId ? session : undefined) } as unknown as SessionRegistry;
  const sync = new WorkloadSync(registry, store, silentLogger);
  const dispatcher = new SessionDispatcher({ registry, store, events: new PanelEvents(), logger: silentLogger, sentDeploys: sync });
  const sets = () => sent.filter((m) => m.type === 'workloads').map((m) => (m as { workloads: Workload[] }).workloads.map((w) => w.deploymentId));
  return { sync, dispatcher, session, sent, reads, sets };
}

describe('a desired set read before a deploy was sent', () => {
  it('still carries that deploy when it goes out after it', async () => {
    const { sync, dispatcher, session, sent, reads, sets } = wire();
    sync.changed(session.nodeId, 'service api created');
    await settle();
    expect(reads).toHaveLength(1);
    // The read is in flight; a deploy of web goes out meanwhile.
    await dispatcher.dispatch({ deploymentId: 'd-web', nodeId: 'n1', nodeName: 'n1', workload: workload('web', 'd-web') });
    // The read started before web's deployment counted: web is placed here, without a deployment.
    reads[0]!({ workloads: [workload('api', 'd-api-1')], placed: ['api', 'web'] });
    await settle();
    expect(sent.map((m) => m.type)).toEqual(['deploy', 'workloads']);
    expect(sets()).toEqual([['d-api-1', 'd-web']]);
  });

  it('a redeploy sent on the session wins over the older deployment the database still holds', async () => {
    const { sync, dispatcher, session, sent, reads, sets } = wire();
    await dispatcher.dispatch({ deploymentId: 'd-web-2', nodeId: 'n1', nodeName: 'n1', workload: workload('web', 'd-web-2') });
    sync.changed(session.nodeId, 'service web updated');
    await settle();
    // Renamed since the deploy: the set names the service as it is now.
    reads[0]!({ workloads: [workload('web', 'd-web-1', 'web-renamed')], placed: ['web'] });
    await settle();
    expect(sets()).toEqual([['d-web-2']]);
    expect((sent.at(-1) as { workloads: Workload[] }).workloads[0]).toEqual(workload('web', 'd-web-2', 'web-renamed'));
  });

  it('leaves out a service deleted or moved away, whatever was sent for it', async () => {
    const { sync, dispatcher, session, reads, sets } = wire();
    await dispatcher.dispatch({ deploymentId: 'd-web', nodeId: 'n1', nodeName: 'n1', workload: workload('web', 'd-web') });
    sync.changed(session.nodeId, 'service web deleted');
    await settle();
    reads[0]!({ workloads: [], placed: [] });
    await settle();
    expect(sets()).toEqual([[]]);
  });

  it('leaves out a deploy the agent reported failed (it went back to what ran before)', async () => {
    const { sync, dispatcher, session, reads, sets } = wire();
    await dispatcher.dispatch({ deploymentId: 'd-web-2', nodeId: 'n1', nodeName: 'n1', workload: workload('web', 'd-web-2') });
    await dispatcher.resultReceived(session, { type: 'deploy.result', id: 'a1', deploymentId: 'd-web-2', status: 'failed', reason: 'exited 1' } as never);
    sync.changed(session.nodeId, 'service api created');
    await settle();
    reads[0]!({ workloads: [workload('web', 'd-web-1')], placed: ['web'] });
    await settle();
    expect(sets()).toEqual([['d-web-1']]);
  });
});

describe('withSentDeploys', () => {
  it('is the read itself when nothing was sent, and keeps a deployment the read already holds', () => {
    const read = { workloads: [workload('a', 'd1')], placed: ['a', 'b'] };
    expect(withSentDeploys(read, undefined)).toBe(read.workloads);
    expect(withSentDeploys(read, new Map([['a', workload('a', 'd1', 'old-name')]]))).toEqual([workload('a', 'd1')]);
  });
});
