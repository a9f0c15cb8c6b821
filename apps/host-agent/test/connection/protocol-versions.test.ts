import { afterEach, describe, expect, it } from 'vitest';
import { CLOSE_CODES, PROTOCOL_VERSION, type ProtocolRange } from '@tether/protocol';
import type { PanelConnection} from '../../src/connection/panel-connection.js';
import { type ConnectionEvents } from '../../src/connection/panel-connection.js';
import { FakePanel, testConnection } from './fake-panel.js';

// Version negotiation on the agent (docs/protocol.md, "Versions"): hello says
// the highest version the agent speaks; refused for it, the agent says the next
// lower one at once, without backoff; refused at its lowest, it waits the
// backoff cap. Today's build speaks only version 1, so these agents are given a
// wider range: a next-release agent (1..2) against panels that take only 1.

const panels: FakePanel[] = [];
const connections: PanelConnection[] = [];
const RECONNECT = { minMs: 800, maxMs: 2_000, healthySessionMs: 300, connectTimeoutMs: 1_000 };

afterEach(async () => {
  await Promise.all(connections.splice(0).map((c) => c.stop()));
  await Promise.all(panels.splice(0).map((p) => p.stop()));
});

async function setup(versions: ProtocolRange | undefined, panelTakes: Partial<FakePanel['versions']> = {}) {
  const panel = new FakePanel();
  panels.push(panel);
  panel.versions = { ...panel.versions, ...panelTakes };
  const url = await panel.start();
  const connection = testConnection(url, {
    reconnect: RECONNECT,
    ...(versions ? { protocolVersions: versions } : {}),
    // Mid-range jitter: a backoff delay is never near zero, so "at once" and "backed off" cannot be confused.
    random: () => 0.5,
  });
  connections.push(connection);
  const closes: ConnectionEvents['closed'][0][] = [];
  connection.on('closed', (event) => closes.push(event));
  const ready = new Promise<ConnectionEvents['ready'][0]>((resolve) => connection.once('ready', resolve));
  connection.start();
  return { panel, connection, closes, ready };
}

const helloVersion = async (panel: FakePanel, n: number) => {
  const conn = await panel.waitForConnection(n);
  const hello = await conn.waitFor<Extract<(typeof conn.received)[number], { type: 'hello' }>>((m) => m.type === 'hello');
  return hello.protocolVersion;
};

describe('protocol version negotiation', () => {
  it('says PROTOCOL_VERSION by default', async () => {
    const { panel, ready } = await setup(undefined);
    expect(await helloVersion(panel, 1)).toBe(PROTOCOL_VERSION);
    expect((await ready).protocolVersion).toBe(PROTOCOL_VERSION);
  });

  it('refused like a version-1 panel refuses (error, then 4004), says the next lower version at once; the next connection starts from the highest again', async () => {
    const { panel, closes, ready } = await setup({ min: 1, max: 2 }, { min: 1, max: 1, closeCode: CLOSE_CODES.PROTOCOL_ERROR });
    expect(await helloVersion(panel, 1)).toBe(2);
    expect(await helloVersion(panel, 2)).toBe(1);
    const session = await ready;
    expect(session.protocolVersion).toBe(1);
    expect(closes).toEqual([expect.objectContaining({ code: CLOSE_CODES.PROTOCOL_ERROR, sessionId: null, retryInMs: 0 })]);
    // Without backoff: well inside the shortest backoff this agent has.
    expect(panel.connections[1]!.openedAt - panel.connections[0]!.closedAt!).toBeLessThan(RECONNECT.minMs / 2);

    // The session ends; the agent tries its highest version first again (the panel may have been upgraded meanwhile).
    panel.connections[1]!.socket.close(CLOSE_CODES.GOING_AWAY, 'restart');
    expect(await helloVersion(panel, 3)).toBe(2);
    expect(await helloVersion(panel, 4)).toBe(1);
  });

  it('steps down on close 4008 alone too (the error frame lost)', async () => {
    const { panel, ready } = await setup({ min: 1, max: 2 }, { withError: false });
    expect(await helloVersion(panel, 1)).toBe(2);
    expect(await helloVersion(panel, 2)).toBe(1);
    expect((await ready).protocolVersion).toBe(1);
  });

  it('refused at its lowest version, waits the backoff cap and says it again', async () => {
    const { panel, closes } = await setup({ min: 1, max: 1 }, { min: 2, max: 2 });
    expect(await helloVersion(panel, 1)).toBe(1);
    await panel.waitForConnection(1);
    await new Promise((r) => setTimeout(r, 100));
    expect(closes).toEqual([expect.objectContaining({ code: CLOSE_CODES.UNSUPPORTED_PROTOCOL_VERSION, retryInMs: RECONNECT.maxMs })]);
    expect(panel.connections).toHaveLength(1);
  });

  it('another protocol error (4004 without the version code) does not step down and backs off as before', async () => {
    const { panel, closes } = await setup({ min: 1, max: 2 }, { min: 1, max: 2 });
    panel.autoWelcome = null;
    expect(await helloVersion(panel, 1)).toBe(2);
    panel.connections[0]!.socket.close(CLOSE_CODES.PROTOCOL_ERROR, 'first frame must be hello');
    await new Promise((r) => setTimeout(r, 100));
    expect(closes).toHaveLength(1);
    expect(closes[0]!.retryInMs).toBeGreaterThan(0);
    expect(closes[0]!.retryInMs).toBeLessThanOrEqual(RECONNECT.minMs);
  });
});
