import { createRequire } from 'node:module';
import path from 'node:path';
import { nodeScriptImage } from '@tether/testkit';

// A customer service with long-lived connections, for drain tests: HTTP GET
// answers $MESSAGE; a WebSocket answers each message with "$MESSAGE:<message>",
// so a client knows which release holds its connection. Exits on SIGTERM at
// once (closing every connection), like a well-behaved app.

const SERVER = `
const http = require('node:http');
const { WebSocketServer } = require('/app/node_modules/ws');
const message = process.env.MESSAGE || 'hello';
const server = http.createServer((req, res) => res.end(message + '\\n'));
const wss = new WebSocketServer({ server });
wss.on('connection', (socket) => {
  socket.on('message', (data) => socket.send(message + ':' + data));
  socket.on('error', () => undefined);
});
server.listen(8080);
process.on('SIGTERM', () => process.exit(0));
`;

const require = createRequire(import.meta.url);

export function ensureWsImage(): Promise<string> {
  const dir = path.dirname(require.resolve('ws/package.json'));
  const { version } = require('ws/package.json') as { version: string };
  return nodeScriptImage('tether-test/ws-service', SERVER, { ws: { dir, version } });
}
