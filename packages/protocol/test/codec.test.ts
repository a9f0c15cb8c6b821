import { describe, expect, it } from 'vitest';
import { decodeV1 } from '@tether/testkit';
import {
  EXAMPLE_MESSAGES,
  FIELD_LIMITS,
  FRAME_ERROR_CODES,
  InvalidMessageError,
  MAX_FRAME_BYTES,
  MAX_STATE_FRAME_BYTES,
  MESSAGE_TYPES,
  AGENT_MESSAGE_TYPES,
  PANEL_MESSAGE_TYPES,
  PROTOCOL_VERSION,
  decode,
  encode,
  maxFrameBytes,
  type Message,
} from '../src/index.js';

function codeOf(raw: unknown, options?: { binary?: boolean }): string {
  const result = decode(raw, options);
  if (result.ok) throw new Error(`expected a rejection, got ${result.message.type}`);
  return result.error.code;
}

describe('round trip', () => {
  it.each(MESSAGE_TYPES)('%s survives encode → decode unchanged', (type) => {
    const message = EXAMPLE_MESSAGES[type] as Message;
    const text = encode(message);
    const result = decode(text);
    expect(result).toEqual({ ok: true, message });
    // Buffers decode like strings (ws hands over Buffers).
    expect(decode(Buffer.from(text))).toEqual({ ok: true, message });
  });

  it('has an example for every message type', () => {
    expect(Object.keys(EXAMPLE_MESSAGES).sort()).toEqual([...MESSAGE_TYPES].sort());
  });

  it('gives every message type a direction (the panel accepts only the agent list)', () => {
    const directed = new Set<string>([...AGENT_MESSAGE_TYPES, ...PANEL_MESSAGE_TYPES]);
    expect(MESSAGE_TYPES.filter((type) => !directed.has(type))).toEqual([]);
    // Only the frames both sides speak are in both lists.
    expect(AGENT_MESSAGE_TYPES.filter((type) => (PANEL_MESSAGE_TYPES as readonly string[]).includes(type)).sort()).toEqual(['ack', 'error']);
  });
});

describe('bad frames each get their own code', () => {
  const hello = EXAMPLE_MESSAGES.hello;

  it('not JSON', () => {
    expect(codeOf('{"type":')).toBe(FRAME_ERROR_CODES.INVALID_JSON);
  });

  it('not an object', () => {
    for (const raw of ['[]', '42', '"hello"', 'null', 'true']) expect(codeOf(raw)).toBe(FRAME_ERROR_CODES.NOT_AN_OBJECT);
  });

  it('no type', () => {
    expect(codeOf(JSON.stringify({ id: 'x-1' }))).toBe(FRAME_ERROR_CODES.MISSING_TYPE);
  });

  it('unknown type, including inherited property names', () => {
    expect(codeOf(JSON.stringify({ type: 'hullo', id: 'x-1' }))).toBe(FRAME_ERROR_CODES.UNKNOWN_TYPE);
    expect(codeOf(JSON.stringify({ type: 'constructor', id: 'x-1' }))).toBe(FRAME_ERROR_CODES.UNKNOWN_TYPE);
    expect(codeOf(JSON.stringify({ type: '__proto__', id: 'x-1' }))).toBe(FRAME_ERROR_CODES.UNKNOWN_TYPE);
  });

  it('missing field, with the field named and the frame id kept for the reply', () => {
    const { node: _node, ...withoutNode } = hello;
    const result = decode(JSON.stringify(withoutNode));
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.error.code).toBe(FRAME_ERROR_CODES.MISSING_FIELD);
    expect(result.error.message).toContain('node');
    expect(result.error.ref).toBe(hello.id);
  });

  it('missing nested field', () => {
    const { seq: _seq, ...withoutSeq } = EXAMPLE_MESSAGES.heartbeat;
    expect(codeOf(JSON.stringify(withoutSeq))).toBe(FRAME_ERROR_CODES.MISSING_FIELD);
    const broken = structuredClone(EXAMPLE_MESSAGES.heartbeat) as unknown as { containers: Record<string, unknown>[] };
    delete broken.containers[0]!.state;
    expect(codeOf(JSON.stringify(broken))).toBe(FRAME_ERROR_CODES.MISSING_FIELD);
  });

  it('wrong-typed field', () => {
    expect(codeOf(JSON.stringify({ ...EXAMPLE_MESSAGES.heartbeat, seq: 'seventeen' }))).toBe(FRAME_ERROR_CODES.INVALID_FIELD);
    expect(codeOf(JSON.stringify({ ...EXAMPLE_MESSAGES.heartbeat, seq: -1 }))).toBe(FRAME_ERROR_CODES.INVALID_FIELD);
    expect(codeOf(JSON.stringify({ type: 7, id: 'x' }))).toBe(FRAME_ERROR_CODES.INVALID_FIELD);
    expect(codeOf(JSON.stringify({ ...EXAMPLE_MESSAGES.ping, id: '' }))).toBe(FRAME_ERROR_CODES.INVALID_FIELD);
  });

  it('oversized, rejected before it is parsed', () => {
    const big = JSON.stringify({ type: 'ping', id: 'x', pad: 'a'.repeat(MAX_FRAME_BYTES) });
    expect(codeOf(big)).toBe(FRAME_ERROR_CODES.FRAME_TOO_LARGE);
    expect(codeOf(Buffer.alloc(MAX_FRAME_BYTES + 1, 0x20))).toBe(FRAME_ERROR_CODES.FRAME_TOO_LARGE);
    // Exactly at the limit is still parsed.
    const atLimit = JSON.stringify({ type: 'ping', id: 'x' }).padEnd(MAX_FRAME_BYTES, ' ');
    expect(decode(atLimit).ok).toBe(true);
  });

  it('wrong protocol version', () => {
    expect(codeOf(JSON.stringify({ ...hello, protocolVersion: PROTOCOL_VERSION + 1 }))).toBe(
      FRAME_ERROR_CODES.UNSUPPORTED_PROTOCOL_VERSION,
    );
  });

  it('binary frames and invalid UTF-8', () => {
    expect(codeOf(Buffer.from(encode(EXAMPLE_MESSAGES.ping)), { binary: true })).toBe(FRAME_ERROR_CODES.BINARY_FRAME);
    // Bytes that are not UTF-8 are not JSON text (on a socket the WebSocket layer closes with 1007 before decode).
    expect(codeOf(Buffer.from([0x7b, 0xff, 0xfe, 0x7d]))).toBe(FRAME_ERROR_CODES.INVALID_JSON);
  });

  it('values that are not frames at all', () => {
    for (const raw of [undefined, null, 42, {}, Symbol('x')]) expect(codeOf(raw)).toBe(FRAME_ERROR_CODES.INVALID_JSON);
  });
});

describe('identifiers refuse control characters; free text is accepted', () => {
  const reject = (message: unknown) => {
    const result = decode(JSON.stringify(message));
    if (result.ok) throw new Error('expected a rejection');
    return result.error;
  };

  it.each([
    ['a message id', { ...EXAMPLE_MESSAGES.ping, id: 'p\u0000' }],
    ['a ref', { ...EXAMPLE_MESSAGES.ack, ref: 'p-3\n' }],
    ['a node name', { ...EXAMPLE_MESSAGES.hello, node: 'edge\u001b[31m' }],
    ['a node name with an unpaired surrogate', { ...EXAMPLE_MESSAGES.hello, node: 'edge\udc00' }],
    ['a result code', { ...EXAMPLE_MESSAGES['deploy.result'], code: 'EXITED\u0000' }],
    ['an error code', { ...EXAMPLE_MESSAGES.error, code: 'X\u007f' }],
    ['a routing hash', { ...EXAMPLE_MESSAGES['routing.map'], hash: 'ab\tcd' }],
    ['a domain', { ...EXAMPLE_MESSAGES['routing.map'], routes: [{ ...EXAMPLE_MESSAGES['routing.map'].routes[0], domain: 'a.example\r\n.com' }] }],
    ['an env name', { ...EXAMPLE_MESSAGES.deploy, workload: { ...EXAMPLE_MESSAGES.deploy.workload, env: { 'A\u0000': 'x' } } }],
  ])('%s', (_what, message) => {
    const error = reject(message);
    expect(error.code).toBe(FRAME_ERROR_CODES.INVALID_FIELD);
    // The reason quotes no raw control character back to the sender.
    expect([...error.message].filter((c) => c.charCodeAt(0) < 0x20)).toEqual([]);
  });

  it('an id with a control character is not echoed back as ref', () => {
    expect(reject({ type: 'nope', id: 'x\u0000' }).ref).toBeNull();
    expect(reject({ type: 'nope', id: 'x'.repeat(129) }).ref).toBeNull();
    expect(reject({ type: 'nope', id: 'x'.repeat(128) }).ref).toBe('x'.repeat(128));
  });

  it('identifiers keep their documented lengths', () => {
    const long = (n: number) => 'n'.repeat(n);
    expect(decode(JSON.stringify({ ...EXAMPLE_MESSAGES.hello, node: long(FIELD_LIMITS.name) })).ok).toBe(true);
    expect(reject({ ...EXAMPLE_MESSAGES.hello, node: long(FIELD_LIMITS.name + 1) }).code).toBe(FRAME_ERROR_CODES.INVALID_FIELD);
    expect(decode(JSON.stringify({ ...EXAMPLE_MESSAGES.ping, id: long(FIELD_LIMITS.id) })).ok).toBe(true);
    expect(reject({ ...EXAMPLE_MESSAGES.ping, id: long(FIELD_LIMITS.id + 1) }).code).toBe(FRAME_ERROR_CODES.INVALID_FIELD);
    const env = (name: string) => ({ ...EXAMPLE_MESSAGES.deploy, workload: { ...EXAMPLE_MESSAGES.deploy.workload, env: { [name]: 'x' } } });
    expect(decode(JSON.stringify(env(long(FIELD_LIMITS.envName)))).ok).toBe(true);
    expect(reject(env(long(FIELD_LIMITS.envName + 1))).code).toBe(FRAME_ERROR_CODES.INVALID_FIELD);
  });

  it('free text with NUL and escapes decodes (the receiver sanitises before storing)', () => {
    const reason = 'exit 1\u0000\u001b[31mpanic\nline 2';
    const result = decode(JSON.stringify({ ...EXAMPLE_MESSAGES['deploy.result'], reason }));
    expect(result.ok && result.message.type === 'deploy.result' && result.message.reason).toBe(reason);
    expect(decode(JSON.stringify({ ...EXAMPLE_MESSAGES['routing.applied'], error: 'bad\u0000' })).ok).toBe(true);
  });
});

describe('encode', () => {
  it('refuses an invalid message with a coded error', () => {
    const bad = { ...EXAMPLE_MESSAGES.heartbeat, seq: -3 } as Message;
    expect(() => encode(bad)).toThrow(InvalidMessageError);
    try {
      encode(bad);
    } catch (err) {
      expect((err as InvalidMessageError).code).toBe(FRAME_ERROR_CODES.INVALID_FIELD);
    }
  });

  it('refuses an unknown type', () => {
    expect(() => encode({ type: 'nope', id: 'x' } as unknown as Message)).toThrow(/unknown message type/);
  });
});

describe('state frames', () => {
  const bigMap = () => {
    const routes = Array.from({ length: 10_000 }, (_, i) => ({
      domain: `app-${i}.customers.example.com`,
      pathPrefix: null,
      serviceId: `cm3servicexyz${String(i).padStart(8, '0')}`,
      upstream: `svc-cm3servicexyz${String(i).padStart(8, '0')}:8080`,
    }));
    return { type: 'routing.map' as const, id: 'p-1', version: 1, hash: 'h', routes };
  };

  it('a 10,000-route routing map exceeds 1 MiB, encodes, and decodes with the state-frame limit only', () => {
    const text = encode(bigMap());
    expect(Buffer.byteLength(text)).toBeGreaterThan(MAX_FRAME_BYTES);
    expect(Buffer.byteLength(text)).toBeLessThan(MAX_STATE_FRAME_BYTES);
    expect(codeOf(text)).toBe(FRAME_ERROR_CODES.FRAME_TOO_LARGE);
    const decoded = decode(text, { maxBytes: MAX_STATE_FRAME_BYTES });
    expect(decoded.ok && decoded.message.type).toBe('routing.map');
  });

  it('other messages keep the 1 MiB limit when encoded', () => {
    expect(maxFrameBytes('heartbeat')).toBe(MAX_FRAME_BYTES);
    expect(maxFrameBytes('workloads')).toBe(MAX_STATE_FRAME_BYTES);
    const container = EXAMPLE_MESSAGES.heartbeat.containers[0]!;
    const huge = { ...EXAMPLE_MESSAGES.heartbeat, containers: Array.from({ length: 6_000 }, () => container) };
    expect(() => encode(huge)).toThrow(/heartbeat of \d+ bytes exceeds the limit of 1048576/);
  });
});

describe('a route probe that was not probed on purpose (notProbed)', () => {
  const text = 'not probed, no certificate requested: shop.example.com resolves to 192.0.2.10, not to this host (198.51.100.7)';
  const probe = {
    domain: 'shop.example.com', pathPrefix: null, state: 'failing', at: '2026-12-02T08:00:00.000Z', status: null, madeBy: 'none', error: text, latencyMs: 2,
    certificate: { issuer: null, notBefore: null, notAfter: null, serial: null, lastError: text },
    notProbed: { reason: 'dns-elsewhere', resolved: ['192.0.2.10'], hostAddresses: ['198.51.100.7', '2001:db8::7'] },
  };
  const heartbeat = (p: unknown) => JSON.stringify({ ...EXAMPLE_MESSAGES.heartbeat, routing: { ...EXAMPLE_MESSAGES.heartbeat.routing, probes: [p], probeIntervalMs: 30_000 } });

  it('decodes; a reason outside the two, or a resolved address that is not one, is refused', () => {
    expect(decode(heartbeat(probe)).ok).toBe(true);
    expect(codeOf(heartbeat({ ...probe, notProbed: { ...probe.notProbed, reason: 'dns-maybe' } }))).toBe(FRAME_ERROR_CODES.INVALID_FIELD);
    expect(codeOf(heartbeat({ ...probe, notProbed: { ...probe.notProbed, resolved: ['shop.example.com'] } }))).toBe(FRAME_ERROR_CODES.INVALID_FIELD);
    // Extra fields are allowed: a panel whose schema lacks notProbed (here v1's, which lacks probes too) takes the frame.
    expect(decodeV1(heartbeat(probe)).ok).toBe(true);
  });
});
