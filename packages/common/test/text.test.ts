import { describe, expect, it } from 'vitest';
import { IDENTIFIER_MAX_LENGTH, identifierProblem, isIdentifier, sanitizeText, truncate } from '../src/index.js';

describe('identifierProblem', () => {
  it('accepts printable names, including non-ASCII and astral characters', () => {
    for (const ok of ['edge-1', 'svc_01', 'ünïcode', 'a😀b', 'x'.repeat(IDENTIFIER_MAX_LENGTH)]) expect(identifierProblem(ok), ok).toBeNull();
  });

  it('refuses control characters, unpaired surrogates, empty and overlong values', () => {
    expect(identifierProblem('a\u0000b')).toMatch(/control characters/);
    expect(identifierProblem('a\nb')).toMatch(/control characters/);
    expect(identifierProblem('a\u001bb')).toMatch(/control characters/);
    expect(identifierProblem('a\u007fb')).toMatch(/control characters/);
    expect(identifierProblem('a\u0085b')).toMatch(/control characters/);
    expect(identifierProblem('\udc00')).toMatch(/unpaired surrogates/);
    expect(identifierProblem('a\ud83d')).toMatch(/unpaired surrogates/);
    expect(identifierProblem('')).toBe('must not be empty');
    expect(identifierProblem('x'.repeat(IDENTIFIER_MAX_LENGTH + 1))).toBe(`must be at most ${IDENTIFIER_MAX_LENGTH} characters`);
    expect(identifierProblem('abcd', 3)).toBe('must be at most 3 characters');
    expect(identifierProblem(42)).toBe('must be a string');
    expect(isIdentifier('ok')).toBe(true);
    expect(isIdentifier('no\tk')).toBe(false);
  });
});

describe('truncate', () => {
  it('returns text that fits unchanged', () => {
    expect(truncate('abc', 3)).toBe('abc');
  });

  it('cuts to max with the marker counted, from either end', () => {
    expect(truncate('abcdef', 4)).toBe('abc…');
    expect(truncate('abcdef', 4, { keep: 'end' })).toBe('…def');
    expect(truncate('abcdef', 4, { marker: '' })).toBe('abcd');
    expect(truncate('abcdefgh', 7, { marker: ' [cut]' })).toBe('a [cut]');
  });

  it('never splits a surrogate pair', () => {
    const text = 'ab😀cd';
    expect(truncate(text, 4)).toBe('ab…');
    expect(truncate(text, 4, { keep: 'end' })).toBe('…cd');
    for (let max = 0; max <= text.length; max++) {
      for (const keep of ['start', 'end'] as const) {
        const out = truncate(text, max, { keep });
        expect(out.length).toBeLessThanOrEqual(max);
        expect(out.replace(/[\ud800-\udfff]/gu, '?')).not.toContain('?');
      }
    }
  });
});

describe('sanitizeText', () => {
  it('escapes control characters and never keeps a NUL', () => {
    const out = sanitizeText('exit\u0000 code\u001b[31m red\r\u007f');
    expect(out).toBe('exit\\u0000 code\\u001b[31m red\\u000d\\u007f');
    expect([...out].filter((c) => c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f)).toEqual([]);
  });

  it('keeps line feeds and tabs unless told not to', () => {
    expect(sanitizeText('a\n\tb')).toBe('a\n\tb');
    expect(sanitizeText('a\n\tb', { keepNewlines: false })).toBe('a\\u000a\\u0009b');
  });

  it('replaces invalid UTF-8 bytes and unpaired surrogates with U+FFFD', () => {
    expect(sanitizeText(Buffer.from([0x6f, 0x6b, 0xff, 0xc3, 0x28, 0x00]))).toBe('ok\ufffd\ufffd(\\u0000');
    expect(sanitizeText(Buffer.from('héllo 😀', 'utf8'))).toBe('héllo 😀');
    expect(sanitizeText('a\udc00b\ud83d')).toBe('a\ufffdb\ufffd');
    expect(sanitizeText('pair 😀 kept')).toBe('pair 😀 kept');
  });

  it('cuts after escaping, keeping the chosen end', () => {
    expect(sanitizeText('\u0000\u0000', { maxLength: 8 })).toBe('\\u0000\\…');
    expect(sanitizeText('line 1\nline 2\nlast line', { maxLength: 10, keep: 'end' })).toBe('…last line');
  });
});
