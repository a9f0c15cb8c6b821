import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, resolveLogFormat } from '../src/logging.js';

/** A destination that records what is written, and says whether it is a terminal. */
function sink(isTTY: boolean): Writable & { isTTY: boolean; text(): string } {
  let text = '';
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      text += chunk.toString();
      done();
    },
  });
  return Object.assign(stream, { isTTY, text: () => text });
}

describe('createLogger', () => {
  it('auto is JSON when the output is not a terminal, pretty when it is', () => {
    expect(resolveLogFormat('auto', false)).toBe('json');
    expect(resolveLogFormat('auto', true)).toBe('pretty');
    expect(resolveLogFormat('json', true)).toBe('json');
    expect(resolveLogFormat('pretty', false)).toBe('pretty');
  });

  it('json: one JSON object per line', () => {
    const out = sink(false);
    createLogger({ level: 'info', format: 'auto', destination: out }).info({ node: 'edge-1' }, 'session opened');
    const line = out.text().trim();
    expect(JSON.parse(line)).toMatchObject({ level: 30, node: 'edge-1', msg: 'session opened' });
  });

  it('pretty: one readable line per event, written at once, no JSON, no colours on a pipe', () => {
    const out = sink(false);
    const log = createLogger({ level: 'info', format: 'pretty', destination: out });
    log.info({ node: 'edge-1', sessionId: 'ses_1' }, 'session opened');
    log.debug({}, 'below the level');
    // Synchronous: the line is there before anything else runs.
    const lines = out.text().trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^\[\d\d:\d\d:\d\d\.\d{3}\] INFO: session opened \{.*"node":"edge-1".*"sessionId":"ses_1".*\}$/);
    expect(lines[0]).not.toMatch(/^\{/);
    expect(out.text()).not.toContain('\u001b[');
  });

  it('pretty on a terminal is coloured', () => {
    const out = sink(true);
    createLogger({ level: 'info', format: 'auto', destination: out }).warn({}, 'careful');
    expect(out.text()).toContain('\u001b[');
    expect(out.text()).toContain('careful');
  });
});
