import { CodedError, CONFIG_ERROR_CATALOG } from '@tether/common';
import { describe, expect, it } from 'vitest';
import { AGENT_ERROR_CATALOG, AGENT_ERROR_CODES } from '../src/errors.js';
import { PROXY_ERROR_CATALOG, ProxyError } from '../src/proxy/errors.js';
import { RUNTIME_ERROR_CATALOG, RuntimeError } from '../src/runtime/errors.js';

describe('agent error catalog', () => {
  it('holds every code of the runtime, the proxy, the configuration and the agent itself, each once', () => {
    const areas = [RUNTIME_ERROR_CATALOG, PROXY_ERROR_CATALOG, CONFIG_ERROR_CATALOG];
    const expected = [...areas.flatMap((c) => Object.keys(c)), 'AGENT_ERROR', 'ISOLATION_NOT_ENFORCED'].sort();
    expect(Object.keys(AGENT_ERROR_CATALOG).sort()).toEqual(expected);
    expect(AGENT_ERROR_CODES.AGENT_ERROR).toBe('AGENT_ERROR');
    for (const meaning of Object.values(AGENT_ERROR_CATALOG)) expect(meaning.length).toBeGreaterThan(10);
  });

  it('runtime and proxy errors are coded errors with their cause', () => {
    const cause = new Error('ECONNREFUSED');
    const runtime = new RuntimeError('RUNTIME_UNAVAILABLE', 'docker is unreachable', { cause });
    const proxy = new ProxyError('PROXY_UNREACHABLE', 'caddy is unreachable', { cause });
    for (const err of [runtime, proxy]) {
      expect(err).toBeInstanceOf(CodedError);
      expect(err.cause).toBe(cause);
    }
    expect([runtime.name, proxy.name]).toEqual(['RuntimeError', 'ProxyError']);
  });
});
