import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { CAPABILITIES, DEFAULT_TIMING, type ProxyEvents } from '@tether/protocol';
import type { PanelConnection } from '../../src/connection/panel-connection.js';
import { EventJournal, reloadEvent } from '../../src/proxy/index.js';
import { FakePanel, testConnection, type PanelConn } from './fake-panel.js';

// proxy.events end to end on the agent side, against a scripted panel over a
// real WebSocket: events go only to a panel that confirmed the capability,
// stay in the journal (and its file) until ACKed, and go again with the same
// (epoch, seq) key after a lost ACK, a reconnect or an agent restart.

const logger = pino({ level: 'silent' });
const dirs: string[] = [];
const panels: FakePanel[] = [];
const connections: PanelConnection[] = [];

afterEach(async () => {
  await Promise.all(connections.splice(0).map((c) => c.stop()));
  await Promise.all(panels.splice(0).map((p) => p.stop()));
});
afterAll(async () => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));

async function setup(options: { capabilities: string[] | null; stateDir?: string; epoch?: number }) {
  const stateDir = options.stateDir ?? (await mkdtemp(path.join(os.tmpdir(), 'tether-events-')));
  dirs.push(stateDir);
  const journal = await EventJournal.open(path.join(stateDir, 'proxy-events.json'), { logger, ...(options.epoch ? { epoch: options.epoch } : {}) });
  const panel = new FakePanel();
  panels.push(panel);
  // Welcome by hand, with or without the capability.
  panel.autoWelcome = null;
  const url = await panel.start();
  const connection = testConnection(url, {
    events: journal,
    reconnect: { minMs: 50, maxMs: 100, healthySessionMs: 300, connectTimeoutMs: 1_000 },
    overrides: { heartbeatIntervalMs: 100 },
    logger,
  });

  connections.push(connection);
  const welcome = async (n: number) => {
    const conn = await panel.waitForConnection(n);
    const hello = await conn.waitFor((m) => m.type === 'hello');
    conn.send({
      type: 'welcome',
      id: `w${n}`,
      ref: hello.id,
      sessionId: `ses_${n}`,
      nodeId: 'node_1',
      timing: { ...DEFAULT_TIMING, ackTimeoutMs: 300 },
      ...(options.capabilities ? { capabilities: options.capabilities } : {}),
    });
    return conn;
  };
  return { stateDir, journal, panel, connection, welcome };
}

const reload = (reason: string) => reloadEvent({ kind: 'change', reason, at: new Date('2026-12-01T05:00:00Z'), hashBefore: 'a', hashAfter: 'b' });
const eventsIn = (conn: PanelConn) => conn.received.filter((m): m is ProxyEvents => m.type === 'proxy.events');
const keys = (messages: ProxyEvents[]) => messages.flatMap((m) => m.events.map((e) => `${e.epoch}:${e.seq}`));

describe('proxy.events', () => {
  it('announces the capability in hello and sends nothing to a panel that did not confirm it', async () => {
    const { journal, connection, welcome } = await setup({ capabilities: null });
    connection.start();
    const conn = await welcome(1);
    expect(conn.received[0]).toMatchObject({ type: 'hello', capabilities: [CAPABILITIES.PROXY_EVENTS, CAPABILITIES.SECRETS] });
    await journal.record(reload('added a.example.com'));
    await conn.waitFor((m) => m.type === 'heartbeat');
    await new Promise((r) => setTimeout(r, 300));
    expect(eventsIn(conn)).toEqual([]);
    // Kept for a panel that speaks it.
    expect(journal.pending()).toHaveLength(1);
  });

  it('sends at once, forgets on ACK, and resends an unACKed event with the same key after the ACK timeout and on the next session', async () => {
    const { journal, connection, welcome, stateDir } = await setup({ capabilities: [CAPABILITIES.PROXY_EVENTS] });
    connection.start();
    const first = await welcome(1);
    await journal.record(reload('added a.example.com'));
    const sent = await first.waitFor<ProxyEvents>((m) => m.type === 'proxy.events');
    expect(sent.events).toEqual([{ ...reload('added a.example.com'), epoch: journal.epoch, seq: 0 }]);

    // No ACK (the panel's database is down): after the ACK timeout the next heartbeat tick sends it again.
    await first.waitFor((m) => m.type === 'proxy.events' && m.id !== sent.id, 2_000);
    expect(new Set(keys(eventsIn(first)))).toEqual(new Set([`${journal.epoch}:0`]));

    // The session drops; the next one sends it again, same key.
    first.socket.terminate();
    const second = await welcome(2);
    const resent = await second.waitFor<ProxyEvents>((m) => m.type === 'proxy.events');
    expect(keys([resent])).toEqual([`${journal.epoch}:0`]);
    second.send({ type: 'ack', id: 'p-ack', ref: resent.id });
    await expect.poll(() => journal.pending().length).toBe(0);
    await journal.flushed();
    expect(JSON.parse(await readFile(path.join(stateDir, 'proxy-events.json'), 'utf8'))).toEqual({ version: 1, pending: [] });
    // Nothing more is sent once ACKed.
    const count = eventsIn(second).length;
    await new Promise((r) => setTimeout(r, 500));
    expect(eventsIn(second)).toHaveLength(count);
  });

  it('an agent restart resends what the previous run left unACKed, under that run\'s epoch', async () => {
    const before = await setup({ capabilities: [CAPABILITIES.PROXY_EVENTS], epoch: 1000 });
    before.connection.start();
    await before.welcome(1);
    await before.journal.record(reload('added a.example.com'));
    await before.journal.flushed();
    await before.connection.stop();

    const after = await setup({ capabilities: [CAPABILITIES.PROXY_EVENTS], stateDir: before.stateDir, epoch: 2000 });
    after.connection.start();
    const conn = await after.welcome(1);
    await after.journal.record(reload('removed a.example.com'));
    await expect.poll(() => new Set(keys(eventsIn(conn)))).toEqual(new Set(['1000:0', '2000:0']));
  });
});
