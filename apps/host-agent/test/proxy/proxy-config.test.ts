import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { DisabledRouting } from '../../src/null-controllers.js';
import { StaticRoutingController, adminSettingsFor, createRoutingController } from '../../src/proxy/index.js';
import { mapOf, route, silentLogger } from './helpers/harness.js';

const base = { TETHER_PANEL_URL: 'http://127.0.0.1:8080', TETHER_NODE_TOKEN: 'n'.repeat(32) };

describe('proxy configuration', () => {
  it('has documented defaults', () => {
    expect(loadConfig(base).proxy).toMatchObject({
      kind: 'none',
      tls: 'auto',
      httpPort: 80,
      httpsPort: 443,
      bindAddress: '0.0.0.0',
      adminTimeoutMs: 30_000,
      checkIntervalMs: 30_000,
      caddyBinary: '/usr/bin/caddy',
      caddyImage: undefined,
      acmeEmail: undefined,
      caddyAdminListen: undefined,
    });
  });

  it('accepts a unix admin socket, refuses what cannot work and names it', () => {
    expect(loadConfig({ ...base, TETHER_PROXY: 'external', TETHER_CADDY_ADMIN_URL: 'unix:///run/caddy/admin.sock' }).proxy.caddyAdminUrl).toBe('unix:///run/caddy/admin.sock');
    expect(() => loadConfig({ ...base, TETHER_PROXY_TLS: 'on' })).toThrow(/TETHER_PROXY_TLS/);
    expect(() => loadConfig({ ...base, TETHER_PROXY_HTTP_PORT: '70000' })).toThrow(/TETHER_PROXY_HTTP_PORT/);
    expect(() => loadConfig({ ...base, TETHER_PROXY_ACME_EMAIL: 'not an address' })).toThrow(/TETHER_PROXY_ACME_EMAIL/);
    expect(() => loadConfig({ ...base, TETHER_PROXY: 'container', TETHER_STATE_DIR: `/${'x'.repeat(100)}` })).toThrow(/TETHER_STATE_DIR: too long for the Caddy admin socket/);
    expect(loadConfig({ ...base, TETHER_PROXY_CHECK_INTERVAL_MS: '0' }).proxy.checkIntervalMs).toBe(0);
  });

  it('keeps the admin listen address the admin URL names', () => {
    expect(adminSettingsFor('http://127.0.0.1:2019')).toEqual({ listen: '127.0.0.1:2019' });
    expect(adminSettingsFor('http://[::1]:2019')).toEqual({ listen: '[::1]:2019' });
    expect(adminSettingsFor('http://localhost')).toEqual({ listen: 'localhost:80' });
    expect(adminSettingsFor('unix:///run/caddy/admin.sock')).toEqual({ listen: 'unix//run/caddy/admin.sock', origins: ['localhost'] });
    expect(adminSettingsFor('http://caddy:2019', '0.0.0.0:2019')).toEqual({ listen: '0.0.0.0:2019' });
  });

  it('builds the static controller for every proxy; none refuses every map', async () => {
    const none = createRoutingController(loadConfig(base), { logger: silentLogger });
    expect(none).toBeInstanceOf(DisabledRouting);
    const result = await none.apply(mapOf([route('a.example.com', 'svc-a:80')]));
    expect(result).toMatchObject({ changed: false, reloaded: false, error: 'no proxy configured (TETHER_PROXY=none)' });
    const external = createRoutingController(loadConfig({ ...base, TETHER_RUNTIME: 'none', TETHER_PROXY: 'external', TETHER_CADDY_ADMIN_URL: 'http://127.0.0.1:2019' }), { logger: silentLogger });
    expect(external).toBeInstanceOf(StaticRoutingController);
    await external.stop();
  });
});
