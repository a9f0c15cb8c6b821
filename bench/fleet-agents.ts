// Child process of bench/fleet.ts: a slice of simulated agents on one
// 127.0.0.x source address (loopback gives about 28,000 ports per address
// pair, a process 20,000 descriptors). Each agent behaves like the real one
// where it matters to the panel: hello, heartbeats every 5 s, pongs, ACKs of
// deploy, workloads and routing.map, and on a lost connection the agent's
// own reconnect backoff (@tether/common Backoff with the host agent's
// defaults: 0.5 s doubling to 30 s, full jitter, reset after a session that
// lasted 10 s, 10 s connect timeout), including the retry hint of a planned
// panel stop (1012 SERVICE_RESTART: retries spread within the hinted window).
import WebSocket from 'ws';
import { LeanWs } from './lean-ws.js';
import { Backoff } from '@tether/common';
import { CLOSE_CODES, PROTOCOL_VERSION, createIdGenerator, parseRetryHint, type Message } from '@tether/protocol';

interface Start {
  type: 'start';
  url: string;
  tokens: string[];
  /** Global index of tokens[0] (node bench_<index>). */
  base: number;
  localAddress: string;
  heartbeatMs: number;
  /** First connects spread over this long. */
  spreadMs: number;
  /** `lean`: bench/lean-ws.ts (default); `ws`: the ws package, as the agent uses (the generator then costs more CPU). */
  client?: 'lean' | 'ws';
}
/** mark: a new phase (counters cleared); `fixedRetryMs` set: reconnect after exactly that, not the backoff (capacity test). */
type Command = Start | { type: 'report'; since?: number } | { type: 'mark'; fixedRetryMs?: number; ignoreHint?: boolean } | { type: 'stop' };

const RECONNECT = { initialMs: 500, maxMs: 30_000 };
const HEALTHY_SESSION_MS = 10_000;
const CONNECT_TIMEOUT_MS = 10_000;

const nextId = createIdGenerator('b');
const routing = { appliedHash: null, reloadsTotal: 0, reloadsToday: 0, lastReloadAt: null, lastReloadReason: null };
const runtime = { available: true, error: null };

interface Agent {
  index: number;
  socket?: WebSocket | LeanWs;
  backoff: Backoff;
  sessionAt: number;
  seq: number;
  timer?: NodeJS.Timeout;
  ready: boolean;
  workloads: boolean;
  map: boolean;
  /** Since the last mark: first connect attempt and when the session had welcome, workloads and map. */
  attemptAt: number;
  completeAt: number;
  /** When the connect that led to the completed session was started. */
  completeAttemptAt: number;
  /** That session's stages in ms: TCP connected (lean client only, else -1), upgrade answered, welcome, workloads + map. */
  completeStages: number[];
  openAt: number;
  /** The Retry-After (ms) of the last 503, for the fixed-retry storm (0: none). */
  retryAfterMs: number;
}

const agents: Agent[] = [];
const errors = new Map<string, number>();
/** When each connect error happened, by code (to count those after the panel listened). */
const errorTimes: [string, number][] = [];
let fixedRetryMs: number | undefined;
/** Behave like an agent older than the retry hint (before/after comparison). */
let ignoreHint = false;
const closes = new Map<number, number>();
let start: Start;

const count = (map: Map<string | number, number>, key: string | number) => map.set(key, (map.get(key) ?? 0) + 1);

function send(agent: Agent, message: Message): void {
  // A load generator, not an agent: frames of known shapes are stringified and read as plain JSON (the
  // panel validates what it gets; a real agent validates on its own host, and here the generator's CPU is
  // taken from the same two cores as the panel's).
  if (agent.socket?.readyState === WebSocket.OPEN) agent.socket.send(JSON.stringify(message));
}

function complete(agent: Agent, attemptAt: number): void {
  if (agent.ready && agent.workloads && agent.map && !agent.completeAt) {
    agent.completeAt = Date.now();
    agent.completeAttemptAt = attemptAt;
    const tcpAt = agent.socket instanceof LeanWs ? agent.socket.connectedAt : 0;
    agent.completeStages = [
      tcpAt ? tcpAt - attemptAt : -1,
      agent.openAt - (tcpAt || attemptAt),
      agent.sessionAt - agent.openAt,
      agent.completeAt - agent.sessionAt,
    ];
  }
}

function connect(agent: Agent): void {
  const attemptAt = Date.now();
  if (!agent.attemptAt) agent.attemptAt = attemptAt;
  const url = `${start.url.replace(/^http/, 'ws')}/v1/agent/connect`;
  const options = { headers: { authorization: `Bearer ${start.tokens[agent.index]}` }, localAddress: start.localAddress, handshakeTimeout: CONNECT_TIMEOUT_MS };
  const socket = start.client === 'ws' ? new WebSocket(url, { ...options, perMessageDeflate: false }) : new LeanWs(url, options);
  agent.socket = socket;
  let refused = false;
  socket.on('unexpected-response', (_req, res) => {
    count(errors, `HTTP ${res.statusCode}`);
    errorTimes.push([`HTTP ${res.statusCode}`, Date.now()]);
    refused = res.statusCode === 503;
    const retryAfterS = res.statusCode === 503 ? Number(res.headers['retry-after']) : NaN;
    agent.retryAfterMs = Number.isInteger(retryAfterS) && retryAfterS > 0 ? retryAfterS * 1_000 : 0;
    if (Number.isInteger(retryAfterS) && retryAfterS > 0 && !ignoreHint) {
      if (agent.backoff.isHinted) agent.backoff.retryAfter(retryAfterS * 1_000);
      else agent.backoff.hint(retryAfterS * 1_000);
    }
    res.resume();
    socket.terminate();
  });
  socket.on('open', () => {
    agent.openAt = Date.now();
    send(agent, { type: 'hello', id: nextId(), node: `bench-${start.base + agent.index}`, agentVersion: 'bench', protocolVersion: PROTOCOL_VERSION, containers: [], runtime, routing });
  });
  socket.on('message', (data) => {
    let m: Message;
    try {
      m = JSON.parse(String(data)) as Message;
    } catch {
      return;
    }
    if (m.type === 'welcome') {
      agent.ready = true;
      agent.sessionAt = Date.now();
      const beat = () => send(agent, { type: 'heartbeat', id: nextId(), seq: agent.seq++, containers: [], runtime, routing });
      agent.timer = setTimeout(() => {
        beat();
        agent.timer = setInterval(beat, start.heartbeatMs);
      }, Math.random() * start.heartbeatMs);
    } else if (m.type === 'ping') send(agent, { type: 'pong', id: nextId(), ref: m.id });
    else if (m.type === 'deploy' || m.type === 'workloads' || m.type === 'routing.map') {
      send(agent, { type: 'ack', id: nextId(), ref: m.id });
      if (m.type === 'workloads') agent.workloads = true;
      if (m.type === 'routing.map') agent.map = true;
    }
    complete(agent, attemptAt);
  });
  socket.on('error', (err: Error & { code?: string }) => {
    if (err.code === 'ECONNREFUSED' || err.code === 'ECONNRESET') refused = true;
    count(errors, err.code ?? err.message);
    errorTimes.push([err.code ?? err.message, Date.now()]);
  });
  socket.on('close', (code, reason) => {
    if (agent.socket !== socket) return;
    clearTimeout(agent.timer);
    clearInterval(agent.timer);
    if (agent.ready) count(closes, code);
    // Closed after the upgrade but before welcome (a refused claim, a panel stopping): counted apart.
    else if (code !== 1006) count(closes, `before welcome: ${code} ${reason.toString().slice(0, 60)}`);
    const lasted = agent.ready ? Date.now() - agent.sessionAt : 0;
    agent.ready = agent.workloads = agent.map = false;
    agent.socket = undefined;
    if (lasted >= HEALTHY_SESSION_MS) agent.backoff.reset();
    const hintMs = code === CLOSE_CODES.SERVICE_RESTART ? parseRetryHint(reason.toString()) : null;
    if (hintMs !== null && !ignoreHint) agent.backoff.hint(hintMs);
    // The fixed-retry storm has no backoff, but a 503's Retry-After is honoured (spread over [RA, 2·RA)), as
    // every agent does: retrying a shedding panel every 250 ms measured the cost of answering 503s, not opens.
    const fixed = fixedRetryMs === undefined ? undefined : agent.retryAfterMs > 0 ? agent.retryAfterMs * (1 + Math.random()) : fixedRetryMs;
    agent.retryAfterMs = 0;
    setTimeout(() => connect(agent), fixed ?? agent.backoff.next(refused));
  });
}

function report(since = 0) {
  const after: Record<string, number> = {};
  for (const [code, at] of errorTimes) if (at >= since) after[code] = (after[code] ?? 0) + 1;
  const attempts = agents.map((a) => a.attemptAt).filter(Boolean);
  const completes = agents.map((a) => a.completeAt).filter(Boolean);
  return {
    type: 'report',
    agents: agents.length,
    ready: agents.filter((a) => a.ready).length,
    complete: completes.length,
    firstAttempt: attempts.length ? Math.min(...attempts) : 0,
    lastAttempt: attempts.length ? Math.max(...attempts) : 0,
    lastComplete: completes.length ? Math.max(...completes) : 0,
    completeTimes: completes,
    /** Per completed agent: when its successful connect started. */
    completeAttempts: agents.filter((a) => a.completeAt).map((a) => a.completeAttemptAt),
    completeStages: agents.filter((a) => a.completeAt).map((a) => a.completeStages),
    errors: Object.fromEntries(errors),
    closes: Object.fromEntries(closes),
    errorsSince: after,
  };
}

process.on('message', (command: Command) => {
  if (command.type === 'start') {
    start = command;
    for (let i = 0; i < command.tokens.length; i++) {
      const agent: Agent = { index: i, backoff: new Backoff(RECONNECT), sessionAt: 0, seq: 0, ready: false, workloads: false, map: false, attemptAt: 0, completeAt: 0, completeAttemptAt: 0, completeStages: [], openAt: 0, retryAfterMs: 0 };
      agents.push(agent);
      setTimeout(() => connect(agent), Math.random() * command.spreadMs);
    }
  } else if (command.type === 'mark') {
    // A new phase: forget first attempts, completions and error counts.
    for (const a of agents) {
      a.attemptAt = 0;
      a.completeAt = 0;
    }
    errors.clear();
    errorTimes.length = 0;
    closes.clear();
    fixedRetryMs = command.fixedRetryMs;
    ignoreHint = command.ignoreHint ?? false;
  } else if (command.type === 'report') process.send?.(report(command.since));
  else if (command.type === 'stop') {
    for (const a of agents) a.socket?.terminate();
    process.exit(0);
  }
});
