import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { CodedError, silentLogger, type Logger } from '../src/index.js';

describe('Logger', () => {
  it('a pino logger is one, and logs an err object with its code and stack', () => {
    const lines: string[] = [];
    const logger: Logger = pino({ base: null }, { write: (line: string) => void lines.push(line) });
    logger.error({ err: new CodedError('DISK_FULL', 'no space'), node: 'edge-1', nodeId: 'node_1' }, 'write failed');
    const record = JSON.parse(lines[0]!) as { err: { type: string; code: string; message: string; stack: string }; node: string; nodeId: string };
    expect(record.err).toMatchObject({ type: 'CodedError', code: 'DISK_FULL', message: 'no space' });
    expect(record.err.stack).toContain('no space');
    expect(record).toMatchObject({ node: 'edge-1', nodeId: 'node_1' });
  });

  it('the silent logger takes every level', () => {
    for (const level of ['debug', 'info', 'warn', 'error'] as const) expect(() => silentLogger[level]({ a: 1 }, 'm')).not.toThrow();
  });
});
