import { describe, expect, it } from 'vitest';
import { parseHostPort, splitHostPort } from '../src/host-port.js';

describe('host:port', () => {
  it.each([
    ['127.0.0.1:8080', { host: '127.0.0.1', port: 8080 }],
    ['panel.internal:0', { host: 'panel.internal', port: 0 }],
    ['[::1]:9000', { host: '::1', port: 9000 }],
    [' 10.0.0.2:65535 ', { host: '10.0.0.2', port: 65_535 }],
  ])('reads %s', (value, expected) => {
    expect(parseHostPort(value)).toEqual(expected);
  });

  it.each(['8080', ':8080', 'host:', 'host:65536', 'host:80x', '::1:80', '[::1]', 'a b:80', 'http://h:80'])('refuses %s', (value) => {
    expect(parseHostPort(value)).toBeUndefined();
  });

  it('splits a validated value at its last colon, the IPv6 host without brackets', () => {
    expect(splitHostPort('[fd00::2]:443')).toEqual({ host: 'fd00::2', port: 443 });
    expect(splitHostPort('c-1.tether:8080')).toEqual({ host: 'c-1.tether', port: 8080 });
  });
});
