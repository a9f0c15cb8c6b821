import { describe, expect, it } from 'vitest';
import { canonicalIp, endpointOf, publishedEndpoint } from '../../src/runtime/published-port.js';

// One spelling of a published endpoint: the private address with the host port Docker picked.

describe('published endpoints', () => {
  it('IPv6 in one spelling and in brackets, IPv4 as it is', () => {
    expect(canonicalIp('FD00:0:0::7')).toBe('fd00::7');
    expect(canonicalIp('10.20.0.7')).toBe('10.20.0.7');
    expect(endpointOf('fd00::7', 32768)).toBe('[fd00::7]:32768');
    expect(endpointOf('10.20.0.7', 32768)).toBe('10.20.0.7:32768');
  });

  it('only the release\'s port bound on the private address counts', () => {
    const ports = [
      { containerPort: '8080/tcp', hostIp: '0.0.0.0', hostPort: 40000 },
      { containerPort: '9090/tcp', hostIp: '10.20.0.7', hostPort: 40001 },
      { containerPort: '8080/tcp', hostIp: '10.20.0.7', hostPort: 40002 },
    ];
    expect(publishedEndpoint(ports, '10.20.0.7', 8080)).toBe('10.20.0.7:40002');
    expect(publishedEndpoint(ports.slice(0, 2), '10.20.0.7', 8080)).toBeNull();
    expect(publishedEndpoint(undefined, '10.20.0.7', 8080)).toBeNull();
    expect(publishedEndpoint([{ containerPort: '8080/tcp', hostIp: 'fd00:0::7', hostPort: 40003 }], 'fd00::7', 8080)).toBe('[fd00::7]:40003');
  });
});
