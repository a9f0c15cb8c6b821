// Child process of bench/sessions.ts: N simulated agents, each a raw
// WebSocket client that says hello, heartbeats every 5 s (staggered), answers
// pings and ACKs. On command a subset goes silent while holding its sockets.
import WebSocket from 'ws';
import { PROTOCOL_VERSION, createIdGenerator, decode, encode, type Message } from '@tether/protocol';

interface Start {
  type: 'start';
  url: string;
  tokens: string[];
  /** Connect tokens[from..to) (the run connects in two halves to measure marginal memory). */
  from: number;
  to: number;
  heartbeatMs: number;
  connectPerSecond: number;
}
type Command = Start | { type: 'silence'; indexes: number[] } | { type: 'ports'; indexes: number[] } | { type: 'stop' };

const nextId = createIdGenerator('b');
const routing = { appliedHash: null, reloadsTotal: 0, reloadsToday: 0, lastReloadAt: null, lastReloadReason: null };
const runtime = { available: true, error: null };

interface Client {
  socket: WebSocket;
  seq: number;
  silent: boolean;
  timer?: NodeJS.Timeout;
  ready: boolean;
}
const clients: Client[] = [];
let ready = 0;
let failed = 0;
const failures = new Map<string, number>();

function send(client: Client, message: Message): void {
  if (!client.silent && client.socket.readyState === WebSocket.OPEN) client.socket.send(encode(message));
}

function connect(index: number, start: Start): void {
  const socket = new WebSocket(`${start.url.replace(/^http/, 'ws')}/v1/agent/connect`, {
    headers: { authorization: `Bearer ${start.tokens[index]}` },
    perMessageDeflate: false,
  });
  const client: Client = { socket, seq: 0, silent: false, ready: false };
  clients[index] = client;
  socket.on('open', () => {
    send(client, { type: 'hello', id: nextId(), node: `bench-${index}`, agentVersion: 'bench', protocolVersion: PROTOCOL_VERSION, containers: [], runtime, routing });
  });
  socket.on('message', (data) => {
    if (client.silent) return;
    const result = decode(data);
    if (!result.ok) return;
    const m = result.message;
    if (m.type === 'welcome') {
      client.ready = true;
      ready++;
      const beat = () => send(client, { type: 'heartbeat', id: nextId(), seq: client.seq++, containers: [], runtime, routing });
      client.timer = setTimeout(() => {
        beat();
        client.timer = setInterval(beat, start.heartbeatMs);
      }, Math.random() * start.heartbeatMs);
    } else if (m.type === 'ping') send(client, { type: 'pong', id: nextId(), ref: m.id });
    else if (m.type === 'deploy' || m.type === 'workloads' || m.type === 'routing.map') send(client, { type: 'ack', id: nextId(), ref: m.id });
  });
  socket.on('close', (code) => {
    clearTimeout(client.timer);
    clearInterval(client.timer);
    if (client.ready) ready--;
    client.ready = false;
    process.send?.({ type: 'closed', index, code, at: Date.now() });
  });
  socket.on('error', (err) => {
    if (client.ready) return;
    failed++;
    failures.set(err.message, (failures.get(err.message) ?? 0) + 1);
  });
}

process.on('message', (command: Command) => {
  if (command.type === 'start') {
    let next = command.from;
    const batch = Math.max(1, Math.round(command.connectPerSecond / 20));
    const timer = setInterval(() => {
      for (let i = 0; i < batch && next < command.to; i++) connect(next++, command);
      if (next >= command.to) clearInterval(timer);
    }, 50);
    const report = setInterval(() => {
      process.send?.({ type: 'progress', ready, failed, opened: next, failures: Object.fromEntries(failures) });
      if (ready + failed >= command.to) clearInterval(report);
    }, 500);
  } else if (command.type === 'silence') {
    for (const i of command.indexes) {
      const client = clients[i]!;
      client.silent = true;
      clearTimeout(client.timer);
      clearInterval(client.timer);
    }
    process.send?.({ type: 'silenced', at: Date.now() });
  } else if (command.type === 'ports') {
    process.send?.({ type: 'ports', ports: command.indexes.map((i) => (clients[i]!.socket as unknown as { _socket: { localPort: number } })._socket.localPort) });
  } else if (command.type === 'stop') {
    for (const c of clients) c?.socket.terminate();
    process.exit(0);
  }
});
