import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  ACKED_MESSAGE_TYPES,
  CAPABILITIES,
  LOG_LIMITS,
  CLOSE_CODES,
  EXAMPLE_MESSAGES,
  FIELD_LIMITS,
  FRAME_ERROR_CATALOG,
  MAX_FRAME_BYTES,
  MAX_ERROR_REPLIES_PER_SECOND,
  MAX_INVALID_BYTES_PER_SECOND,
  MAX_INVALID_STREAK,
  MAX_PAYLOAD_BYTES,
  MAX_STATE_FRAME_BYTES,
  MESSAGE_TYPES,
  TIMING_DEFAULTS,
  decode,
} from '../src/index.js';

// docs/protocol.md is the human contract; this keeps it equal to the code.

const doc = readFileSync(path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../docs/protocol.md'), 'utf8');

function section(type: string): string {
  const start = doc.indexOf(`### \`${type}\``);
  expect(start, `docs/protocol.md has a section for ${type}`).toBeGreaterThanOrEqual(0);
  const next = doc.indexOf('\n### ', start + 1);
  return doc.slice(start, next === -1 ? undefined : next);
}

describe('docs/protocol.md', () => {
  it.each(MESSAGE_TYPES)('documents %s with an example frame equal to the code', (type) => {
    const json = section(type).match(/```json\n([\s\S]*?)\n```/)?.[1];
    expect(json, `example frame for ${type}`).toBeDefined();
    const decoded = decode(json!);
    expect(decoded).toEqual({ ok: true, message: EXAMPLE_MESSAGES[type] });
  });

  it('lists every close code with its number', () => {
    for (const [name, code] of Object.entries(CLOSE_CODES)) {
      expect(doc).toMatch(new RegExp(`\\| ${code} \\| \`${name}\` \\|`));
    }
  });

  const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const tableRows = (heading: string) => {
    const start = doc.indexOf(`## ${heading}\n`);
    expect(start, `docs/protocol.md has a "${heading}" section`).toBeGreaterThanOrEqual(0);
    const end = doc.indexOf('\n## ', start + 1);
    return doc.slice(start, end).split('\n').filter((line) => /^\| `/.test(line));
  };

  it('lists every frame error code with the catalog\'s meaning, and no other', () => {
    for (const [code, meaning] of Object.entries(FRAME_ERROR_CATALOG)) expect(doc).toMatch(new RegExp(`^\\| \`${code}\` \\| ${escape(meaning)} \\|$`, 'm'));
    const documented = tableRows('Frame error codes').map((row) => row.match(/^\| `([A-Z0-9_]+)`/)?.[1]);
    expect(documented.sort()).toEqual(Object.keys(FRAME_ERROR_CATALOG).sort());
  });

  it('lists every close code, including the WebSocket layer\'s 1007 and 1009, and no other', () => {
    const start = doc.indexOf('## Close codes\n');
    const rows = doc.slice(start, doc.indexOf('\n## ', start + 1)).split('\n').filter((line) => /^\| \d+ \|/.test(line));
    const sort = (codes: number[]) => [...codes].sort((a, b) => a - b);
    expect(sort(rows.map((row) => Number(row.split('|')[1])))).toEqual(sort(Object.values(CLOSE_CODES)));
    expect(CLOSE_CODES.INVALID_PAYLOAD).toBe(1007);
    expect(CLOSE_CODES.MESSAGE_TOO_BIG).toBe(1009);
  });

  it('states every limit with its value', () => {
    const limits = { MAX_FRAME_BYTES, MAX_STATE_FRAME_BYTES, MAX_PAYLOAD_BYTES, MAX_INVALID_STREAK, MAX_ERROR_REPLIES_PER_SECOND, MAX_INVALID_BYTES_PER_SECOND };
    for (const [name, value] of Object.entries(limits)) expect(doc).toMatch(new RegExp(`\\| \`${name}\` \\| ${value} \\|`));
    expect(tableRows('Limits')).toHaveLength(Object.keys(limits).length);
    // The hello section and the error section give the same streak.
    expect(section('hello')).toContain(`\`MAX_INVALID_STREAK\`-th (${MAX_INVALID_STREAK}th)`);
    expect(section('error')).toContain(`\`MAX_INVALID_STREAK\` (${MAX_INVALID_STREAK}) invalid frames in a row`);
  });

  it('states the bound and kind of every string field', () => {
    const rows = tableRows('Field rules');
    expect(rows).toHaveLength(Object.keys(FIELD_LIMITS).length);
    for (const [field, bound] of Object.entries(FIELD_LIMITS)) {
      const kind = field === 'text' || field === 'envValue' ? 'free text' : 'identifier';
      expect(doc).toMatch(new RegExp(`^\\| \`${field}\` \\| ${bound} \\| ${kind} \\|`, 'm'));
    }
  });

  it('says every ACKed message kills the session when its ACK is late', () => {
    const named = (text: string) => ACKED_MESSAGE_TYPES.every((type) => text.includes(`\`${type}\``));
    const ackRule = doc.slice(doc.indexOf('**ACK timeout**'), doc.indexOf('\n- ', doc.indexOf('**ACK timeout**')));
    expect(named(ackRule), ackRule).toBe(true);
    expect(named(doc.match(/^\| 4001 \|.*$/m)![0])).toBe(true);
    expect(named(section('ack'))).toBe(true);
  });

  it('says a node without a session has sessionId null', () => {
    expect(doc).toMatch(/`sessionId` as `null` for a node that is `unreachable`/);
  });

  it('lists every capability and every log-stream limit with its value', () => {
    for (const name of Object.values(CAPABILITIES)) expect(doc).toMatch(new RegExp(`^\\| \`${escape(name)}\` \\|`, 'm'));
    for (const [name, value] of Object.entries(LOG_LIMITS)) expect(doc).toMatch(new RegExp(`^\\| ${name} \\| ${value} \\|`, 'm'));
  });

  it('states every timing default', () => {
    for (const [name, value] of Object.entries(TIMING_DEFAULTS)) expect(doc).toMatch(new RegExp(`\\| \`${name}\` \\| ${value} \\|`));
  });
});
