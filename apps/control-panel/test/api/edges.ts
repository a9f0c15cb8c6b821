import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ERROR_CATALOG } from '../../src/errors.js';
import { code, sharedPostgres, startRestPanel, type RestPanel } from '../helpers/rest-harness.js';

// The API's edges, each reproduced from outside over real sockets: every
// answer has the { error: { code, message } } shape with a catalogued code,
// never a 500, never the request echoed back, nothing stored altered.

interface RawAnswer {
  status: number;
  headers: string;
  body: string;
  /** The server closed the connection (it must, after refusing bad HTTP). */
  closed: boolean;
}

/** Writes bytes as they are (no client fixes them up) and reads the answer until the server closes. */
function rawRequest(port: number, bytes: string | Buffer, timeoutMs = 3_000): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no close within ${timeoutMs} ms; got ${Buffer.concat(chunks).toString('latin1').slice(0, 200)}`));
    }, timeoutMs);
    socket.on('data', (d) => chunks.push(d));
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString('latin1');
      const [head = '', body = ''] = text.split('\r\n\r\n');
      resolve({ status: Number(head.split(' ')[1]), headers: head, body, closed: true });
    });
    socket.write(bytes);
  });
}

const catalogued = (body: string, expected: keyof typeof ERROR_CATALOG) => {
  const parsed = JSON.parse(body) as { error: { code: string; message: string } };
  expect(Object.keys(parsed)).toEqual(['error']);
  expect(parsed.error).toEqual({ code: expected, message: expect.any(String) });
  return parsed.error;
};

describe('API edges', () => {
  let p: RestPanel;
  let port: number;
  let team: { id: string; token: string };

  beforeAll(async () => {
    p = await startRestPanel({ pg: await sharedPostgres() });
    port = (p.app.server.address() as { port: number }).port;
    team = await p.team('edges');
    await p.node('edge-node');
  });

  afterAll(async () => {
    await p?.close();
  });

  describe('strings that are not well-formed Unicode are refused at validation, naming the field', () => {
    it('an unpaired surrogate in a service env value: POST and PATCH answer 400, never 500, nothing stored', async () => {
      const before = await p.prisma.service.count();
      const created = await p.call('POST', '/v1/services', { token: team.token, body: '{"name":"sur","image":"nginx","env":{"A":"\\udc00"}}' });
      expect(await code(Promise.resolve(created))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
      expect(created.body.error.message).toContain('body/env/A');
      expect(await p.prisma.service.count()).toBe(before);

      const made = await p.call('POST', '/v1/services', { token: team.token, body: { name: 'sur', image: 'nginx', env: { A: 'ok' } } });
      expect(made.status).toBe(201);
      const patched = await p.call('PATCH', `/v1/services/${made.body.id}`, { token: team.token, body: '{"env":{"A":"x\\ud800"}}' });
      expect(await code(Promise.resolve(patched))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
      expect(patched.body.error.message).toContain('body/env/A');
      expect((await p.call('GET', `/v1/services/${made.body.id}`, { token: team.token })).body.env).toEqual({ A: 'ok' });
      // A surrogate pair is one well-formed character and passes.
      expect((await p.call('PATCH', `/v1/services/${made.body.id}`, { token: team.token, body: '{"env":{"A":"\\ud83d\\ude00"}}' })).body.env).toEqual({ A: '😀' });
    });

    it('a token name with an unpaired surrogate or with invalid UTF-8 bytes: 400, not stored as U+FFFD', async () => {
      const before = await p.prisma.apiToken.count();
      const surrogate = await p.call('POST', `/v1/teams/${team.id}/tokens`, { body: '{"name":"ci\\udc00"}' });
      expect(await code(Promise.resolve(surrogate))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
      expect(surrogate.body.error.message).toContain('body/name');

      const body = Buffer.concat([Buffer.from('{"name":"ci'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]);
      const res = await fetch(`http://127.0.0.1:${port}/v1/teams/${team.id}/tokens`, {
        method: 'POST',
        headers: { authorization: `Bearer ${p.operator}`, 'content-type': 'application/json' },
        body,
      });
      const answer = (await res.json()) as { error: { code: string; message: string } };
      expect(res.status).toBe(400);
      expect(answer.error.code).toBe('VALIDATION_FAILED');
      expect(answer.error.message).toContain('body/name');
      expect(await p.prisma.apiToken.count()).toBe(before);
    });
  });

  describe('URLs', () => {
    it('a path parameter over 100 characters: 414 URI_TOO_LONG in the API shape, without the path', async () => {
      const long = 'a'.repeat(10_000);
      const res = await p.call('GET', `/v1/services/${long}`, { token: team.token });
      expect(await code(Promise.resolve(res))).toMatchObject({ status: 414, code: 'URI_TOO_LONG' });
      expect(Object.keys(res.body)).toEqual(['error']);
      expect(JSON.stringify(res.body)).not.toContain('aaaaaaaaaa');
      // 100 characters is still a parameter (an unknown id).
      expect(await code(p.call('GET', `/v1/services/${'a'.repeat(64)}`, { token: team.token }))).toMatchObject({ status: 404 });
    });

    it('a path that is not valid percent-encoding: 400 INVALID_URL, without the path', async () => {
      for (const path of ['/v1/services/%zz', '/v1/servi%zzces', '/v1/%E0%A4%A']) {
        const res = await p.call('GET', path, { token: team.token });
        expect(await code(Promise.resolve(res))).toMatchObject({ status: 400, code: 'INVALID_URL' });
        expect(JSON.stringify(res.body)).not.toContain('%');
      }
    });

    it('an unknown long or odd path: 404 NOT_FOUND without repeating it', async () => {
      const res = await p.call('GET', `/v1/${'x'.repeat(500)}<script>`, { token: team.token });
      expect(await code(Promise.resolve(res))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
      expect(JSON.stringify(res.body)).not.toContain('xxxxxxxx');
      expect(JSON.stringify(res.body)).not.toContain('script');
    });
  });

  describe('HTTP that Node refuses answers in the API shape and closes the connection', () => {
    const cases: [string, string, number, keyof typeof ERROR_CATALOG][] = [
      ['an unknown method', 'FOO /v1/services HTTP/1.1\r\nHost: x\r\n\r\n', 400, 'MALFORMED_REQUEST'],
      ['both Content-Length and Transfer-Encoding', 'POST /v1/services HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400, 'MALFORMED_REQUEST'],
      ['a control character in a header', 'GET /healthz HTTP/1.1\r\nHost: x\r\nX-Junk: a\x01b\r\n\r\n', 400, 'MALFORMED_REQUEST'],
      ['a bad chunk size', 'POST /v1/services HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n', 400, 'MALFORMED_REQUEST'],
      ['a 20 KB header', `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'b'.repeat(20_000)}\r\n\r\n`, 431, 'HEADERS_TOO_LARGE'],
      ['not HTTP at all', 'HELLO\r\n\r\n', 400, 'MALFORMED_REQUEST'],
    ];
    for (const [what, request, status, expected] of cases) {
      it(`${what}: ${status} ${expected}`, async () => {
        const answer = await rawRequest(port, request);
        expect(answer.status).toBe(status);
        expect(answer.headers.toLowerCase()).toContain('content-type: application/json');
        catalogued(answer.body, expected);
        expect(answer.body).not.toContain('bbbbbbbb');
        expect(answer.closed).toBe(true);
      });
    }

    it('the server keeps serving after each of them', async () => {
      expect((await p.call('GET', '/healthz', { token: null })).status).toBe(200);
    });
  });

  describe('bodies', () => {
    it('Content-Encoding we do not decode (gzip, or anything but identity): 415 UNSUPPORTED_ENCODING, nothing stored', async () => {
      const before = await p.prisma.service.count();
      for (const encoding of ['gzip', 'br', 'deflate, identity']) {
        const res = await p.call('POST', '/v1/services', { token: team.token, body: { name: 'gz', image: 'nginx' }, headers: { 'content-encoding': encoding } });
        expect(await code(Promise.resolve(res))).toMatchObject({ status: 415, code: 'UNSUPPORTED_ENCODING' });
      }
      expect(await p.prisma.service.count()).toBe(before);
      const plain = await p.call('POST', '/v1/services', { token: team.token, body: { name: 'gz', image: 'nginx' }, headers: { 'content-encoding': 'identity' } });
      expect(plain.status).toBe(201);
    });
  });

  describe('a route needs a port to reach', () => {
    it('attaching a route to a service without internalPort: 409 SERVICE_HAS_NO_PORT, nothing stored', async () => {
      const bare = await p.call('POST', '/v1/services', { token: team.token, body: { name: 'noport', image: 'nginx' } });
      const before = await p.prisma.route.count();
      p.emitted.length = 0;
      const res = await p.call('POST', '/v1/routes', { token: team.token, body: { domain: 'noport.example.com', serviceId: bare.body.id } });
      expect(await code(Promise.resolve(res))).toMatchObject({ status: 409, code: 'SERVICE_HAS_NO_PORT' });
      expect(await p.prisma.route.count()).toBe(before);
      expect(p.emitted).toEqual([]);
      // With a port it attaches; the port cannot then be taken away while the route exists.
      await p.call('PATCH', `/v1/services/${bare.body.id}`, { token: team.token, body: { internalPort: 8080 } });
      expect((await p.call('POST', '/v1/routes', { token: team.token, body: { domain: 'noport.example.com', serviceId: bare.body.id } })).status).toBe(201);
      expect(await code(p.call('PATCH', `/v1/services/${bare.body.id}`, { token: team.token, body: { internalPort: null } }))).toMatchObject({
        status: 409,
        code: 'SERVICE_HAS_NO_PORT',
      });
      expect((await p.call('GET', `/v1/services/${bare.body.id}`, { token: team.token })).body.internalPort).toBe(8080);
    });
  });
});
