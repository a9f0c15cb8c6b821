import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { EXAMPLE_MESSAGES, FRAME_ERROR_CODES, MESSAGE_TYPES, decode, encode, type Message } from '../src/index.js';

const KNOWN_CODES = new Set<string>(Object.values(FRAME_ERROR_CODES));

// decode() faces the network: whatever arrives, it must answer, never throw.

function mutate(value: unknown, path: (string | number)[], replacement: unknown): unknown {
  if (path.length === 0) return replacement;
  if (typeof value !== 'object' || value === null) return replacement;
  const copy = (Array.isArray(value) ? [...value] : { ...value }) as Record<string | number, unknown>;
  const [head, ...rest] = path as [string | number, ...(string | number)[]];
  copy[head] = mutate(copy[head], rest, replacement);
  return copy;
}

function paths(value: unknown, prefix: (string | number)[] = []): (string | number)[][] {
  const out: (string | number)[][] = [prefix];
  if (typeof value === 'object' && value !== null) {
    for (const [key, child] of Object.entries(value)) out.push(...paths(child, [...prefix, Array.isArray(value) ? Number(key) : key]));
  }
  return out;
}

let decoded = 0;
function decodeMustAnswer(raw: unknown): void {
  const result = decode(raw);
  decoded++;
  expect(typeof result.ok).toBe('boolean');
  if (!result.ok) expect(KNOWN_CODES.has(result.error.code)).toBe(true);
}

describe('decode never throws', () => {
  it('on 4,000 random strings, byte arrays and JSON values', () => {
    fc.assert(
      fc.property(
        fc.oneof(fc.string({ maxLength: 400 }), fc.uint8Array({ maxLength: 400 }), fc.json({ maxDepth: 6 }), fc.anything()),
        (raw) => decodeMustAnswer(raw),
      ),
      { numRuns: 4_000 },
    );
  });

  it('on 6,000 mutated valid frames (field replaced, deleted, truncated, byte-flipped)', () => {
    const messages = MESSAGE_TYPES.map((t) => EXAMPLE_MESSAGES[t] as Message);
    const replacement = fc.oneof(fc.anything(), fc.constant(undefined), fc.string(), fc.integer(), fc.constant(null));
    fc.assert(
      fc.property(
        fc.constantFrom(...messages),
        fc.nat(),
        replacement,
        fc.nat(),
        fc.integer({ min: 0, max: 255 }),
        (message, pathPick, value, cut, byte) => {
          const all = paths(message);
          const path = all[pathPick % all.length]!;
          const mutated = mutate(message, path, value);
          const text = JSON.stringify(mutated) ?? '';
          decodeMustAnswer(text);
          decodeMustAnswer(text.slice(0, cut % (text.length + 1)));
          const bytes = Buffer.from(encode(message));
          bytes[cut % bytes.length] = byte;
          decodeMustAnswer(bytes);
        },
      ),
      { numRuns: 2_000 },
    );
    expect(decoded).toBeGreaterThanOrEqual(10_000);
  });
});
