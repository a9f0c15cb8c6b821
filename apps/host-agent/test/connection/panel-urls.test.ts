import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort, waitFor } from '@tether/testkit';
import { ConfigError, loadConfig } from '../../src/config.js';
import { PanelConnection } from '../../src/connection/panel-connection.js';
import type { Observation, WorkloadController } from '../../src/controllers.js';
import { DisabledRouting } from '../../src/null-controllers.js';
import { FakePanel } from './fake-panel.js';

// Several panels (issue 10): TETHER_PANEL_URL takes a comma-separated list
// (it used to be parsed as one URL and crash the agent with "Invalid URL"),
// and the agent tries the panels in a shuffled order with its backoff.

class IdleWorkloads implements WorkloadController {
  async start() {}
  async stop() {}
  async observe(): Promise<Observation> {
    return { containers: [], runtime: { available: true, error: null } };
  }
  setDesired() {}
  deploy(): never {
    throw new Error('no deploys here');
  }
}

const token = 'n'.repeat(32);
const panels: FakePanel[] = [];
const connections: PanelConnection[] = [];
afterEach(async () => {
  await Promise.all(connections.splice(0).map((c) => c.stop()));
  await Promise.all(panels.splice(0).map((p) => p.stop()));
});

describe('several panel URLs', () => {
  it('config: a comma-separated list gives every URL; a bad entry is named, not a crash', () => {
    expect(loadConfig({ TETHER_PANEL_URL: 'http://a:8080, https://b.example.com ,ws://c:1', TETHER_NODE_TOKEN: token }).panelUrls).toEqual([
      'http://a:8080',
      'https://b.example.com',
      'ws://c:1',
    ]);
    expect(loadConfig({ TETHER_PANEL_URL: 'http://a:8080', TETHER_NODE_TOKEN: token }).panelUrls).toEqual(['http://a:8080']);
    expect(() => loadConfig({ TETHER_PANEL_URL: 'http://a:8080,ftp://b', TETHER_NODE_TOKEN: token })).toThrow(ConfigError);
    expect(() => loadConfig({ TETHER_PANEL_URL: 'http://a:8080,http://[bad', TETHER_NODE_TOKEN: token })).toThrow(/TETHER_PANEL_URL/);
  });

  it('tries the panels in a shuffled order: a dead first choice costs one backoff, and a panel that stops moves the agent to another', async () => {
    const live = [new FakePanel(), new FakePanel()];
    panels.push(...live);
    const [urlA, urlB] = await Promise.all(live.map((p) => p.start()));
    const dead = `http://127.0.0.1:${await freePort()}`;
    for (const p of live) p.autoWelcome = {};
    // With random() = 0 the Fisher–Yates shuffle of [B, dead, A] is [dead, A, B]: the dead panel comes first.
    const connection = new PanelConnection({
      panelUrl: [urlB!, dead, urlA!],
      token,
      nodeName: 'multi',
      agentVersion: 'test',
      workloads: new IdleWorkloads(),
      routing: new DisabledRouting(),
      reconnect: { minMs: 20, maxMs: 100, healthySessionMs: 100, connectTimeoutMs: 1_000 },
      logger: pino({ level: 'silent' }),
      random: () => 0,
    });
    connections.push(connection);
    const started = Date.now();
    connection.start();
    const first = await Promise.race(live.map((p, i) => p.waitForConnection(1, 5_000).then(() => i)));
    expect(first).toBe(0);
    expect(Date.now() - started).toBeLessThan(2_000);
    // The panel it reached stops: the agent reaches the other one.
    await live[first]!.stop();
    const other = live[1 - first]!;
    await other.waitForConnection(1, 5_000);
    // The fake panel counts a connection when its side of the upgrade completes, which can be before the agent
    // has read the 101 (still 'connecting': CI, under load). What counts is the session the agent then holds.
    await waitFor(() => connection.state === 'ready', { timeoutMs: 2_000, message: 'a ready session on the other panel' });
    expect(other.connections).toHaveLength(1);
  });
});
