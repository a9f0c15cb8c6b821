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

  it('warns only when the registered fleet outnumbers the accept queue, saying what to raise', () => {
    expect(backlogWarning(4000, 65535, 4096)).toBeUndefined();
    expect(backlogWarning(10_000, 65535, 16384)).toBeUndefined();
    expect(backlogWarning(10_000, 65535, undefined)).toBeUndefined();
    expect(backlogWarning(0, 1, 4096)).toBeUndefined();
    // The default backlog, cut by the kernel's default.
    expect(backlogWarning(10_000, 65535, 4096)).toBe(
      '10000 nodes are registered but the accept queue holds 4096 (TETHER_LISTEN_BACKLOG 65535, cut to net.core.somaxconn 4096): ' +
        'when they reconnect at once (a panel restart), the kernel drops the connections past it and their agents wait out TCP retransmits; ' +
        'raise net.core.somaxconn (sysctl -w net.core.somaxconn=16384, or the container\'s sysctls).',
    );
    // A backlog set lower than the kernel allows.
    expect(backlogWarning(5_000, 1024, 65535)).toBe(
      '5000 nodes are registered but the accept queue holds 1024 (TETHER_LISTEN_BACKLOG 1024): ' +
        'when they reconnect at once (a panel restart), the kernel drops the connections past it and their agents wait out TCP retransmits; ' +
        'set TETHER_LISTEN_BACKLOG=8192.',
    );
    // Both short.
    expect(backlogWarning(5_000, 1024, 2048)).toMatch(/raise net\.core\.somaxconn \(sysctl -w net\.core\.somaxconn=8192.*\) and set TETHER_LISTEN_BACKLOG=8192\.$/);
  });
});
