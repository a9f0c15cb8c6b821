import http from 'node:http';
import type { Socket } from 'node:net';

// An independent witness of what the agent asks Caddy to do: a small HTTP
// proxy in front of Caddy's admin API that counts every POST /load it passes
// on. Tests compare these counts with the controller's own counters, so a
// controller that loads without counting (or counts without loading) fails.

export type AdminTarget = { port: number } | { socketPath: string };

export interface AdminWitness {
  /** Point the agent's admin URL here. */
  readonly url: string;
  /** POST /load requests Caddy answered with 200. */
  readonly loads: number;
  /** POST /load requests received, whatever the answer. */
  readonly loadAttempts: number;
  /** GET /config/ requests received (a full read of the running config). */
  readonly reads: number;
  /** GET /id/<id> requests received (one small object). */
  readonly idReads: number;
  /** Every request received, whatever it was. */
  readonly calls: number;
  /** hang: accept requests and never answer (a frozen Caddy). */
  mode: 'pass' | 'hang';
  reset(): void;
  close(): Promise<void>;
}

export async function startAdminWitness(target: AdminTarget): Promise<AdminWitness> {
  let loads = 0;
  let loadAttempts = 0;
  let reads = 0;
  let idReads = 0;
  let calls = 0;
  const sockets = new Set<Socket>();
  // Caddy checks the Host header against its admin listen address; present the one it expects.
  const host = 'port' in target ? `127.0.0.1:${target.port}` : 'localhost';
  let mode: AdminWitness['mode'] = 'pass';

  const server = http.createServer((req, res) => {
    const isLoad = req.method === 'POST' && req.url === '/load';
    if (isLoad) loadAttempts += 1;
    calls += 1;
    if (req.method === 'GET' && req.url?.startsWith('/config')) reads += 1;
    if (req.method === 'GET' && req.url?.startsWith('/id/')) idReads += 1;
    if (mode === 'hang') return;
    const upstream = http.request(
      { ...('port' in target ? { host: '127.0.0.1', port: target.port } : { socketPath: target.socketPath }), method: req.method, path: req.url, headers: { ...req.headers, host } },
      (answer) => {
        if (isLoad && answer.statusCode === 200) loads += 1;
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      },
    );
    upstream.on('error', () => res.destroy());
    req.pipe(upstream);
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };

  return {
    url: `http://127.0.0.1:${port}`,
    get loads() {
      return loads;
    },
    get loadAttempts() {
      return loadAttempts;
    },
    get reads() {
      return reads;
    },
    get idReads() {
      return idReads;
    },
    get calls() {
      return calls;
    },
    get mode() {
      return mode;
    },
    set mode(next) {
      mode = next;
    },
    reset() {
      loads = 0;
      loadAttempts = 0;
      reads = 0;
      idReads = 0;
      calls = 0;
    },
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
