import { describe, expect, it } from 'vitest';
import { FIELD_LIMITS } from '@tether/protocol';
import { compareTimes, dockerSince, LogFrameParser, pieces } from '../../src/logs/log-lines.js';

// Docker's multiplexed log frames → sanitised lines, whatever the bytes and
// however the stream is cut.

const frame = (stream: 1 | 2, payload: Buffer | string) => {
  const body = Buffer.isBuffer(payload) ? payload : Buffer.from(payload);
  const header = Buffer.alloc(8);
  header[0] = stream;
  header.writeUInt32BE(body.length, 4);
  return Buffer.concat([header, body]);
};

describe('LogFrameParser', () => {
  it('parses frames cut anywhere, with their stream and Docker timestamp', () => {
    const bytes = Buffer.concat([
      frame(1, '2026-11-29T10:00:01.123456789Z hello\n'),
      frame(2, '2026-11-29T10:00:01.2Z oops\n'),
      frame(1, '2026-11-29T10:00:02Z \n'),
    ]);
    for (let cut = 1; cut < bytes.length; cut += 7) {
      const parser = new LogFrameParser();
      const lines = [...parser.push(bytes.subarray(0, cut)), ...parser.push(bytes.subarray(cut))];
      expect(lines).toEqual([
        { stream: 'stdout', time: '2026-11-29T10:00:01.123456789Z', text: 'hello' },
        { stream: 'stderr', time: '2026-11-29T10:00:01.2Z', text: 'oops' },
        { stream: 'stdout', time: '2026-11-29T10:00:02Z', text: '' },
      ]);
      expect(parser.buffered).toBe(0);
    }
  });

  it('sanitises binary garbage: invalid UTF-8 replaced, NUL/ESC/CR escaped, tabs kept', () => {
    const payload = Buffer.concat([Buffer.from('2026-11-29T10:00:01Z a\tb '), Buffer.from([0xff, 0xfe, 0x00, 0x1b, 0x0d]), Buffer.from('\n')]);
    expect(new LogFrameParser().push(frame(1, payload))).toEqual([{ stream: 'stdout', time: '2026-11-29T10:00:01Z', text: 'a\tb \ufffd\ufffd\\u0000\\u001b\\u000d' }]);
  });

  it('cuts a long line into pieces within the text bound, never inside a surrogate pair', () => {
    const long = `${'x'.repeat(FIELD_LIMITS.text - 1)}😀${'y'.repeat(10)}`;
    const lines = new LogFrameParser().push(frame(1, `2026-11-29T10:00:01Z ${long}\n`));
    expect(lines.map((l) => l.text.length)).toEqual([FIELD_LIMITS.text - 1, 12]);
    expect(lines.map((l) => l.text).join('')).toBe(long);
    expect(pieces('abc', 2)).toEqual(['ab', 'c']);
  });

  it('a line without a timestamp keeps the previous line\'s time', () => {
    const parser = new LogFrameParser();
    expect(parser.push(frame(1, '2026-11-29T10:00:01Z a\nno stamp\n')).map((l) => [l.time, l.text])).toEqual([
      ['2026-11-29T10:00:01Z', 'a'],
      ['2026-11-29T10:00:01Z', 'no stamp'],
    ]);
  });
});

describe('times', () => {
  it('compares RFC 3339 UTC times to the nanosecond, whatever the fraction length', () => {
    expect(compareTimes('2026-11-29T10:00:01.1Z', '2026-11-29T10:00:01.100000000Z')).toBe(0);
    expect(compareTimes('2026-11-29T10:00:01.000000001Z', '2026-11-29T10:00:01Z')).toBe(1);
    expect(compareTimes('2026-11-29T10:00:00.999Z', '2026-11-29T10:00:01Z')).toBe(-1);
    expect(dockerSince('2026-11-29T10:00:01.5Z')).toBe(`${Date.parse('2026-11-29T10:00:01Z') / 1000}.500000000`);
  });
});
