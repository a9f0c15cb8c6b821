import Type from 'typebox';
import { Compile } from 'typebox/compile';
import { describe, expect, it } from 'vitest';
import { Identifier, Nullable } from '../src/index.js';

describe('Nullable', () => {
  it('accepts the schema or null, nothing else', () => {
    const v = Compile(Nullable(Type.Integer({ minimum: 1 })));
    expect(v.Check(3)).toBe(true);
    expect(v.Check(null)).toBe(true);
    expect(v.Check(0)).toBe(false);
    expect(v.Check(undefined)).toBe(false);
    expect(v.Check('3')).toBe(false);
  });
});

describe('Identifier', () => {
  it('validates like identifierProblem: bounds, no control characters, no unpaired surrogates', () => {
    const v = Compile(Identifier(8));
    for (const ok of ['a', 'edge-1', 'é😀', 'x'.repeat(8)]) expect(v.Check(ok), ok).toBe(true);
    for (const bad of ['', 'x'.repeat(9), 'a\u0000', 'a\nb', '\u001b', '\u0085', '\udc00', 'a\ud83d']) expect(v.Check(bad), JSON.stringify(bad)).toBe(false);
  });
});
