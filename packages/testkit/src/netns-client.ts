import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import { inNetns } from './netns.js';

// The test process stays in the host's namespace; what has to happen inside
// another one is done by a small Node child started there (nsenter) and
// driven over its IPC channel.

export interface HttpGet {
  address: string;
  port: number;
  /** Host header (default: address:port). */
  host?: string;
  path?: string;
  /** The whole exchange, connect included (default 5000). */
  timeoutMs?: number;
}

export interface HttpResult {
  /** null when no response came (see `error`). */
  status: number | null;
  body: string;
  /** 'timeout' when nothing came back in time (packets dropped), else the socket error's code (ECONNREFUSED, …). */
  error: string | null;
  ms: number;
  headers: Record<string, string | string[] | undefined>;
}

/** A long-lived client inside one namespace; every request opens a fresh connection (no keep-alive). */
export interface NetnsClient {
  readonly netns: string;
  get(request: HttpGet): Promise<HttpResult>;
  /** Whether a TCP connection to address:port is established within `timeoutMs`. */
  tcpConnect(address: string, port: number, timeoutMs?: number): Promise<boolean>;
  close(): Promise<void>;
}

// Runs in the child (CommonJS, no imports from the kit): one answer per message, by id.
const CLIENT_SCRIPT = `
const http = require('node:http');
const net = require('node:net');
process.on('disconnect', () => process.exit(0));
process.on('message', (m) => {
  const started = Date.now();
  let done = false;
  const reply = (r) => { if (done) return; done = true; clearTimeout(timer); process.send({ id: m.id, ms: Date.now() - started, ...r }); };
  const code = (e) => e.code || e.message;
  let timer;
  if (m.kind === 'tcp') {
    const s = net.connect({ host: m.address, port: m.port });
    timer = setTimeout(() => { s.destroy(); reply({ ok: false }); }, m.timeoutMs);
    s.once('connect', () => { s.destroy(); reply({ ok: true }); });
    s.once('error', () => reply({ ok: false }));
    return;
  }
  const headers = { host: m.host, connection: 'close' };
  const req = http.get({ host: m.address, port: m.port, path: m.path, headers, agent: false }, (res) => {
    let body = '';
    res.setEncoding('utf8');
    res.on('data', (d) => { body += d; });
    res.on('end', () => reply({ status: res.statusCode, body, error: null, headers: res.headers }));
    res.on('error', (e) => reply({ status: res.statusCode, body, error: code(e), headers: res.headers }));
  });
  timer = setTimeout(() => { req.destroy(); reply({ status: null, body: '', error: 'timeout', headers: {} }); }, m.timeoutMs);
  req.on('error', (e) => reply({ status: null, body: '', error: code(e), headers: {} }));
});
process.send({ ready: true });
`;

/** A Node child running `script` inside `netns`, with an IPC channel and the tail of its output kept for errors. */
function nodeIn(netns: string, script: string, env: NodeJS.ProcessEnv = {}): { child: ChildProcess; output: () => string } {
  const [bin, args] = inNetns(netns, process.execPath, ['-e', script]);
  const child = spawn(bin, args, { stdio: ['ignore', 'pipe', 'pipe', 'ipc'], env: { ...process.env, ...env } });
  let output = '';
  const keep = (chunk: Buffer) => (output = (output + chunk.toString('utf8')).slice(-4000));
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  return { child, output: () => output };
}

/** The first message of the child (its handle too), or an error with its output when it exits first. */
function firstMessage(node: ReturnType<typeof nodeIn>, what: string): Promise<{ message: unknown; handle: unknown }> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`${what} exited (${code}) before it was ready: ${node.output()}`));
    node.child.once('exit', onExit);
    node.child.once('error', reject);
    node.child.once('message', (message, handle) => {
      node.child.off('exit', onExit);
      resolve({ message, handle });
    });
  });
}

export async function netnsClient(netns: string): Promise<NetnsClient> {
  const node = nodeIn(netns, CLIENT_SCRIPT);
  const { child } = node;
  await firstMessage(node, `client in ${netns}`);
  let nextId = 0;
  const pending = new Map<number, { resolve: (answer: Record<string, unknown>) => void; reject: (err: Error) => void }>();
  child.on('message', (answer: Record<string, unknown>) => {
    const waiter = pending.get(answer.id as number);
    pending.delete(answer.id as number);
    waiter?.resolve(answer);
  });
  child.on('exit', (code) => {
    for (const waiter of pending.values()) waiter.reject(new Error(`client in ${netns} exited (${code}): ${node.output()}`));
    pending.clear();
  });
  const ask = (message: Record<string, unknown>) =>
    new Promise<Record<string, unknown>>((resolve, reject) => {
      if (!child.connected) return reject(new Error(`client in ${netns} is closed`));
      const id = nextId++;
      pending.set(id, { resolve, reject });
      child.send({ ...message, id });
    });

  return {
    netns,
    async get(request) {
      const answer = await ask({
        kind: 'get',
        address: request.address,
        port: request.port,
        host: request.host ?? `${request.address}:${request.port}`,
        path: request.path ?? '/',
        timeoutMs: request.timeoutMs ?? 5_000,
      });
      return { status: answer.status as number | null, body: answer.body as string, error: answer.error as string | null, ms: answer.ms as number, headers: answer.headers as HttpResult['headers'] };
    },
    async tcpConnect(address, port, timeoutMs = 2_000) {
      return (await ask({ kind: 'tcp', address, port, timeoutMs })).ok === true;
    },
    async close() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGKILL');
      await exited;
    },
  };
}

// Listens in the namespace, then hands the listening socket to the parent:
// a socket stays in the namespace it was made in, whoever accepts on it.
const LISTEN_SCRIPT = `
const server = require('node:net').createServer();
server.on('error', (e) => { console.error(e.message); process.exit(1); });
server.listen(0, process.env.LISTEN_ADDRESS, () => {
  process.send({ port: server.address().port }, server, () => { server.close(); process.disconnect(); });
});
`;

export interface Exposure {
  /** The port it listens on, at the address it was given, inside the namespace. */
  port: number;
  close(): Promise<void>;
}

/**
 * Makes 127.0.0.1:`localPort` of the test process reachable at `address` (an
 * address of `netns`) on a port of its choosing. Every connection is a plain
 * TCP pipe, half-close included (an HTTP upgrade passes); the local server
 * sees 127.0.0.1 as the peer.
 */
export async function exposeInNetns(netns: string, address: string, localPort: number): Promise<Exposure> {
  const { message, handle } = await firstMessage(nodeIn(netns, LISTEN_SCRIPT, { LISTEN_ADDRESS: address }), `listener in ${netns}`);
  const server = handle as net.Server;
  const sockets = new Set<net.Socket>();
  server.on('connection', (inbound) => {
    // Both sides keep writing after the other's FIN, so a half-close is passed on, not turned into a full close.
    inbound.allowHalfOpen = true;
    const upstream = net.connect({ port: localPort, host: '127.0.0.1', allowHalfOpen: true });
    sockets.add(inbound).add(upstream);
    inbound.pipe(upstream);
    upstream.pipe(inbound);
    // A clean close ends the other side through the pipe (its unsent bytes still go out); only an error cuts both.
    for (const socket of [inbound, upstream]) {
      socket.on('error', () => {
        inbound.destroy();
        upstream.destroy();
      });
      socket.on('close', () => sockets.delete(socket));
    }
  });
  return {
    port: (message as { port: number }).port,
    async close() {
      for (const socket of sockets) socket.destroy();
      sockets.clear();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
