// Child process of bench/fleet.ts: one authenticated agent that sends
// malformed frames of every error kind (1 MiB frames among them) as fast as
// its socket takes them, with a valid heartbeat after every second bad frame
// so the invalid streak never closes the session. Reports what it sent and
// how many `error` replies came back.
import WebSocket from 'ws';
import { MAX_FRAME_BYTES, PROTOCOL_VERSION, createIdGenerator, encode } from '@tether/protocol';

const [url, token, node, seconds] = process.argv.slice(2) as [string, string, string, string];
const nextId = createIdGenerator('h');
const routing = { appliedHash: null, reloadsTotal: 0, reloadsToday: 0, lastReloadAt: null, lastReloadReason: null };
const runtime = { available: true, error: null };
const MiB = MAX_FRAME_BYTES;

// Every frame error code the panel can answer an established session with.
const bad: [string, string | Buffer, boolean][] = [
  ['INVALID_JSON', '{not json', false],
  ['NOT_AN_OBJECT', '[1,2,3]', false],
  ['MISSING_TYPE', '{"id":"x1"}', false],
  ['UNKNOWN_TYPE', '{"type":"hullo","id":"x2"}', false],
  ['MISSING_FIELD', '{"type":"heartbeat","id":"x3"}', false],
  ['INVALID_FIELD', JSON.stringify({ type: 'heartbeat', id: 'x4', seq: 'one', containers: [], runtime, routing }), false],
  ['BINARY_FRAME', Buffer.from('{"type":"pong","id":"x5","ref":"x"}'), true],
  ['UNEXPECTED_MESSAGE', '{"type":"ping","id":"x6"}', false],
  ['UNEXPECTED_MESSAGE(hello again)', JSON.stringify({ type: 'hello', id: 'x7', node, agentVersion: 'x', protocolVersion: PROTOCOL_VERSION + 1, containers: [], runtime, routing }), false],
  ['FRAME_TOO_LARGE (1.5 MiB)', `{"type":"heartbeat","id":"x8","pad":"${'a'.repeat(MiB * 1.5)}"}`, false],
  // Just under the limit: parsed in full (a valid type, then a field the schema refuses; JSON cut at the end).
  ['INVALID_FIELD (1 MiB)', `{"type":"heartbeat","id":"x9","seq":1,"containers":[],"runtime":{"available":true,"error":null},"routing":${JSON.stringify(routing)},"pad":"${'b'.repeat(MiB - 400)}"}`, false],
  ['INVALID_JSON (1 MiB)', `{"type":"heartbeat","id":"x10","pad":"${'c'.repeat(MiB - 100)}"`, false],
];

const socket = new WebSocket(`${url.replace(/^http/, 'ws')}/v1/agent/connect`, { headers: { authorization: `Bearer ${token}` }, perMessageDeflate: false, localAddress: '127.0.0.250' });
let errors = 0;
let sent = 0;
let bytes = 0;
let beats = 0;
let seq = 0;
let closed: number | null = null;
const heartbeat = () => encode({ type: 'heartbeat', id: nextId(), seq: seq++, containers: [], runtime, routing });

socket.on('message', (data) => {
  const text = String(data);
  if (text.includes('"type":"error"')) errors++;
  // ACKs what must be ACKed (its workloads and map), like any agent: only its other frames are hostile.
  const acked = /^\{"type":"(workloads|routing\.map|deploy)","id":"([^"]+)"/.exec(text);
  if (acked) socket.send(encode({ type: 'ack', id: nextId(), ref: acked[2]! }));
});
socket.on('close', (code) => (closed = code));
socket.on('error', () => undefined);
socket.on('open', () => {
  socket.send(encode({ type: 'hello', id: nextId(), node, agentVersion: 'bench-hostile', protocolVersion: PROTOCOL_VERSION, containers: [], runtime, routing }));
  const until = Date.now() + Number(seconds) * 1000;
  let i = 0;
  // As fast as the socket takes it: keep at most 8 MiB queued, top up on every drain of the buffer.
  const pump = () => {
    while (Date.now() < until && closed === null && socket.bufferedAmount < 8 * MiB) {
      const [, data, binary] = bad[i % bad.length]!;
      socket.send(data, { binary });
      sent++;
      bytes += data.length;
      if (++i % 2 === 0) {
        socket.send(heartbeat());
        beats++;
      }
    }
    if (Date.now() < until && closed === null) setTimeout(pump, 1);
    else {
      process.send?.({ type: 'hostile', sent, bytes, beats, errors, closed, kinds: bad.map(([k]) => k) });
      setTimeout(() => process.exit(0), 200);
    }
  };
  setTimeout(pump, 500);
});
