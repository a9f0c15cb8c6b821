import Type from 'typebox';
import { describe, expect, it } from 'vitest';
import { ConfigError, parseEnv } from '../src/index.js';

const Schema = Type.Object({
  PORT: Type.Integer({ minimum: 0, maximum: 65535, default: 8080 }),
  NAME: Type.String({ minLength: 2 }),
  MODE: Type.Union([Type.Literal('a'), Type.Literal('b')], { default: 'a' }),
  OPTIONAL: Type.Optional(Type.String()),
});

describe('parseEnv', () => {
  it('applies defaults and converts numbers', () => {
    expect(parseEnv(Schema, { NAME: 'xy', PORT: ' 9000 ' })).toEqual({ NAME: 'xy', PORT: 9000, MODE: 'a' });
    expect(parseEnv(Schema, { NAME: 'xy', PORT: '' })).toMatchObject({ PORT: 8080 });
  });

  it('names every bad variable at once', () => {
    try {
      parseEnv(Schema, { PORT: '80x', MODE: 'c' });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).problems.join('\n')).toContain('PORT="80x": expected a whole number');
    }
    try {
      parseEnv(Schema, { PORT: '70000', MODE: 'c' });
      expect.unreachable();
    } catch (err) {
      const text = (err as ConfigError).problems.join('\n');
      expect(text).toContain('PORT=70000');
      expect(text).toContain('NAME');
    }
  });
});
