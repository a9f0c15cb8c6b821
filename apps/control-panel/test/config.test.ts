import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { MIN_PROTOCOL_VERSION, PROTOCOL_VERSION } from '@tether/protocol';
import { undocumentedEnvVars } from '@tether/testkit';
import { ConfigError, ENV_VARS, loadConfig } from '../src/config.js';
import { PANEL_ERROR_CATALOG } from '../src/errors.js';

describe('panel config', () => {
  it('applies the documented defaults', () => {
    const config = loadConfig({});
    expect(config.port).toBe(8080);
    expect(config.host).toBe('127.0.0.1');
    expect(config.databaseUrl).toBeUndefined();
    expect(config.dataDir).toBe(path.resolve('.tether'));
    expect(config.sessions).toMatchObject({ idleTimeoutMs: 30_000, pingIntervalMs: 30_000, ackTimeoutMs: 10_000, agentIdleTimeoutMs: 90_000, heartbeatIntervalMs: 5_000 });
    expect(config.routing.reconcileIntervalMs).toBe(300_000);
    expect(config.logFormat).toBe('auto');
  });

  it('TETHER_LOG_FORMAT takes auto, pretty or json only', () => {
    expect(loadConfig({ TETHER_LOG_FORMAT: 'pretty' }).logFormat).toBe('pretty');
    expect(loadConfig({ TETHER_LOG_FORMAT: 'json' }).logFormat).toBe('json');
    expect(() => loadConfig({ TETHER_LOG_FORMAT: 'xml' })).toThrow(/TETHER_LOG_FORMAT="xml"/);
  });

  it('TETHER_INTERNAL_LISTEN takes host:port (IPv6 in brackets, port 0); the advertised URL follows it, never the public URL', () => {
    expect(loadConfig({}).http.internalListen).toBeUndefined();
    expect(loadConfig({ TETHER_PUBLIC_URL: 'https://panel.example' }).panel.internalUrl).toBe('https://panel.example');
    const separate = loadConfig({ TETHER_INTERNAL_LISTEN: '10.0.0.5:9090', TETHER_PUBLIC_URL: 'https://panel.example' });
    expect(separate.http.internalListen).toEqual({ host: '10.0.0.5', port: 9090 });
    // Learned from the listener once it listens (server.ts), not the public URL.
    expect(separate.panel.internalUrl).toBeUndefined();
    expect(loadConfig({ TETHER_INTERNAL_LISTEN: '[fd00::1]:0' }).http.internalListen).toEqual({ host: 'fd00::1', port: 0 });
    expect(loadConfig({ TETHER_INTERNAL_LISTEN: 'panel-a.internal:7000' }).http.internalListen).toEqual({ host: 'panel-a.internal', port: 7000 });
    const named = loadConfig({ TETHER_INTERNAL_LISTEN: '0.0.0.0:9090', TETHER_PANEL_INTERNAL_URL: 'http://panel-a:9090' });
    expect(named.panel.internalUrl).toBe('http://panel-a:9090');
    for (const bad of ['9090', 'host:', ':9090', 'host:65536', 'host:9090/x', 'http://host:9090', '[::1:9090']) {
      expect(() => loadConfig({ TETHER_INTERNAL_LISTEN: bad }), bad).toThrow(ConfigError);
      expect(() => loadConfig({ TETHER_INTERNAL_LISTEN: bad }), bad).toThrow(/TETHER_INTERNAL_LISTEN/);
    }
    // A wildcard cannot be dialled: the panel does not start without an internal URL to advertise.
    for (const wildcard of ['0.0.0.0:9090', '[::]:9090']) {
      expect(() => loadConfig({ TETHER_INTERNAL_LISTEN: wildcard }), wildcard).toThrow(/TETHER_PANEL_INTERNAL_URL/);
    }
  });

  it('takes overrides', () => {
    const config = loadConfig({ TETHER_PORT: '0', TETHER_SESSION_IDLE_MS: '300', DATABASE_URL: 'postgres://u:p@db:5432/t' });
    expect(config.port).toBe(0);
    expect(config.sessions.idleTimeoutMs).toBe(300);
    expect(config.databaseUrl).toBe('postgres://u:p@db:5432/t');
  });

  it('refuses bad values with a message naming each variable', () => {
    try {
      loadConfig({ TETHER_PORT: 'eighty', TETHER_SESSION_IDLE_MS: '1', DATABASE_URL: 'mysql://x', TETHER_ADMIN_TOKEN: 'short' });
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      const problems = (err as ConfigError).problems.join('\n');
      expect(problems).toContain('TETHER_PORT');
    }
    try {
      loadConfig({ TETHER_SESSION_IDLE_MS: '1', DATABASE_URL: 'mysql://x', TETHER_ADMIN_TOKEN: 'short' });
      expect.unreachable();
    } catch (err) {
      const problems = (err as ConfigError).problems.join('\n');
      for (const key of ['TETHER_SESSION_IDLE_MS', 'DATABASE_URL', 'TETHER_ADMIN_TOKEN']) expect(problems).toContain(key);
    }
  });
});

describe('TETHER_PROTOCOL_VERSION_MAX', () => {
  it('defaults to every version this build speaks and takes a pin within MIN_PROTOCOL_VERSION..PROTOCOL_VERSION only', () => {
    expect(loadConfig({}).sessions.protocolVersions).toEqual({ min: MIN_PROTOCOL_VERSION, max: PROTOCOL_VERSION });
    expect(loadConfig({ TETHER_PROTOCOL_VERSION_MAX: String(MIN_PROTOCOL_VERSION) }).sessions.protocolVersions.max).toBe(MIN_PROTOCOL_VERSION);
    for (const bad of [String(MIN_PROTOCOL_VERSION - 1), String(PROTOCOL_VERSION + 1), 'latest']) {
      expect(() => loadConfig({ TETHER_PROTOCOL_VERSION_MAX: bad })).toThrow(/TETHER_PROTOCOL_VERSION_MAX/);
    }
  });
});

describe('docs/operations.md', () => {
  it('lists every environment variable this app reads', () => {
    expect(undocumentedEnvVars(ENV_VARS)).toEqual([]);
    expect(ENV_VARS.length).toBeGreaterThan(10);
  });

  it('lists every panel error code outside the API', () => {
    const text = readFileSync(path.resolve(import.meta.dirname, '../../../docs/operations.md'), 'utf8');
    for (const code of Object.keys(PANEL_ERROR_CATALOG)) expect(text, code).toMatch(new RegExp(`\\|\\s*\`${code}\`\\s*\\|`));
    expect(new ConfigError(['x']).code).toBe('INVALID_CONFIG');
  });
});
