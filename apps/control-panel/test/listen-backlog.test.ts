import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { backlogWarning, readSomaxconn } from '../src/listen-backlog.js';

describe('the listen backlog against net.core.somaxconn', () => {
  it('reads the namespace value here (Linux), and nothing where it cannot', () => {
    expect(readSomaxconn()).toBe(Number(readFileSync('/proc/sys/net/core/somaxconn', 'utf8')));
    expect(readSomaxconn(() => '4096\n')).toBe(4096);
    expect(readSomaxconn(() => 'x')).toBeUndefined();
    expect(
      readSomaxconn(() => {
        throw new Error('ENOENT');
      }),
    ).toBeUndefined();
  });

  it('warns only when the kernel would cut the queue short, naming both numbers and the sysctl', () => {
    expect(backlogWarning(4096, 4096)).toBeUndefined();
    expect(backlogWarning(1024, 4096)).toBeUndefined();
    expect(backlogWarning(16384, undefined)).toBeUndefined();
    const warning = backlogWarning(16384, 4096);
    expect(warning).toContain('TETHER_LISTEN_BACKLOG is 16384 but net.core.somaxconn is 4096');
    expect(warning).toContain('sysctl -w net.core.somaxconn=16384');
  });
});
