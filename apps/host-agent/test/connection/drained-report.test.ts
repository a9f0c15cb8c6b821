import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { sleep } from '@tether/testkit';
import { CAPABILITIES, DEFAULT_TIMING, type DeployDrained } from '@tether/protocol';
import type { PanelConnection } from '../../src/connection/panel-connection.js';
import type { DrainReport } from '../../src/controllers.js';
import { FakePanel, testConnection } from './fake-panel.js';

// deploy.drained on the agent's session: sent to a panel that confirmed
// workload.drain, held across a reconnect like deploy.result, never sent to a
// panel that did not confirm it.

const logger = pino({ level: 'silent' });
const panels: FakePanel[] = [];
const connections: PanelConnection[] = [];
afterEach(async () => {
  await Promise.all(connections.splice(0).map((c) => c.stop()));
  await Promise.all(panels.splice(0).map((p) => p.stop()));
});

const report: DrainReport = { deploymentId: 'dep_2', connectionsOpenAtSwitch: 3, connectionsCut: 1, drainEndedAt: '2026-01-01T00:00:30.000Z' };

async function setup() {
  const panel = new FakePanel();
  panels.push(panel);
  panel.autoWelcome = null;
  const connection = testConnection(await panel.start(), { reconnect: { minMs: 50, maxMs: 100, healthySessionMs: 300, connectTimeoutMs: 1_000 }, overrides: { heartbeatIntervalMs: 100 }, logger });
  connections.push(connection);
  const welcome = async (n: number, capabilities: string[]) => {
    const conn = await panel.waitForConnection(n);
    const hello = await conn.waitFor((m) => m.type === 'hello');
    conn.send({ type: 'welcome', id: `w${n}`, ref: hello.id, sessionId: `ses_${n}`, nodeId: 'node_1', timing: DEFAULT_TIMING, capabilities });
    await conn.waitFor((m) => m.type === 'heartbeat');
    return conn;
  };
  return { connection, welcome };
}

describe('deploy.drained', () => {
  it('goes at once to a panel that confirmed workload.drain', async () => {
    const { connection, welcome } = await setup();
    connection.start();
    const conn = await welcome(1, [CAPABILITIES.WORKLOAD_DRAIN]);
    connection.reportDrained(report);
    expect(await conn.waitFor<DeployDrained>((m) => m.type === 'deploy.drained')).toMatchObject({ type: 'deploy.drained', ...report });
  });

  it('is held while there is no session and sent on the next one', async () => {
    const { connection, welcome } = await setup();
    connection.start();
    const first = await welcome(1, [CAPABILITIES.WORKLOAD_DRAIN]);
    first.socket.terminate();
    await sleep(20);
    connection.reportDrained(report);
    const second = await welcome(2, [CAPABILITIES.WORKLOAD_DRAIN]);
    expect(await second.waitFor<DeployDrained>((m) => m.type === 'deploy.drained')).toMatchObject(report);
    expect(first.received.some((m) => m.type === 'deploy.drained')).toBe(false);
  });

  it('never goes to a panel that did not confirm the capability', async () => {
    const { connection, welcome } = await setup();
    connection.start();
    const conn = await welcome(1, []);
    connection.reportDrained(report);
    await sleep(300);
    expect(conn.received.map((m) => m.type)).not.toContain('deploy.drained');
  });
});
