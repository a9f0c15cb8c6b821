import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';

// The agent's only HTTP listener, off unless TETHER_AGENT_METRICS_PORT is set,
// on loopback unless TETHER_AGENT_METRICS_HOST says otherwise: GET /metrics
// (Prometheus) and GET /healthz (200 while the event loop answers, with the
// session state for whoever looks; the panel being down does not make the
// agent unhealthy, as with the health file). Nothing else is answered.

export interface MetricsServerOptions {
  host: string;
  port: number;
  registry: Registry;
  health: () => { connection: string; sessionId: string | null };
}

export async function startMetricsServer(options: MetricsServerOptions): Promise<{ server: Server; port: number; close(): Promise<void> }> {
  const server = createServer((request, response) => {
    const send = (status: number, type: string, body: string) => {
      response.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
      response.end(body);
    };
    const url = (request.url ?? '/').split('?')[0];
    if (request.method !== 'GET' && request.method !== 'HEAD') return send(405, 'text/plain', 'method not allowed\n');
    if (url === '/metrics') {
      options.registry.metrics().then(
        (text) => send(200, options.registry.contentType, text),
        (err: Error) => send(500, 'text/plain', `metrics failed: ${err.message}\n`),
      );
      return;
    }
    if (url === '/healthz') return send(200, 'application/json', JSON.stringify({ status: 'ok', ...options.health() }));
    return send(404, 'text/plain', 'not found\n');
  });
  // The endpoint is not worth a slow client's socket: bounded headers and idle time.
  server.headersTimeout = 10_000;
  server.requestTimeout = 10_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const port = (server.address() as { port: number }).port;
  return {
    server,
    port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
