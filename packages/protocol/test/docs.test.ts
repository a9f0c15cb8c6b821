import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CLOSE_CODES, EXAMPLE_MESSAGES, FRAME_ERROR_CODES, MESSAGE_TYPES, TIMING_DEFAULTS, decode } from '../src/index.js';

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

  it('lists every frame error code', () => {
    for (const code of Object.values(FRAME_ERROR_CODES)) expect(doc).toMatch(new RegExp(`\\| \`${code}\` \\|`));
  });

  it('states every timing default', () => {
    for (const [name, value] of Object.entries(TIMING_DEFAULTS)) expect(doc).toMatch(new RegExp(`\\| \`${name}\` \\| ${value} \\|`));
  });
});
