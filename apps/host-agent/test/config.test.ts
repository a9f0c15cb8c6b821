import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { MIN_PROTOCOL_VERSION, PROTOCOL_VERSION } from '@tether/protocol';
import { undocumentedEnvVars } from '@tether/testkit';
import { ConfigError, ENV_VARS, ROUTING_CONFIG_GONE, loadConfig } from '../src/config.js';

const base = { TETHER_PANEL_URL: 'http://127.0.0.1:8080', TETHER_NODE_TOKEN: 'n'.repeat(32) };

describe('agent config', () => {
  it('applies documented defaults', () => {
    const config = loadConfig(base);
    expect(config.reconnect).toEqual({ minMs: 500, maxMs: 30_000, healthySessionMs: 10_000, connectTimeoutMs: 10_000 });
    expect(config.overrides).toEqual({});
    expect(config.stateDir).toBe(path.resolve('.tether-agent'));
    expect(config.proxy.caddyConfigPath).toBe(path.join(config.stateDir, 'caddy.json'));
    expect(config.logFormat).toBe('auto');
    expect(loadConfig({ ...base, TETHER_LOG_FORMAT: 'pretty' }).logFormat).toBe('pretty');
    expect(() => loadConfig({ ...base, TETHER_LOG_FORMAT: 'xml' })).toThrow(/TETHER_LOG_FORMAT="xml"/);
  });

  it('refuses a missing token, a bad URL and inconsistent settings, naming each', () => {
    expect(() => loadConfig({ TETHER_PANEL_URL: 'ftp://x' })).toThrow(ConfigError);
    try {
      loadConfig({ TETHER_PANEL_URL: 'ftp://x' });
    } catch (err) {
      const text = (err as ConfigError).problems.join('\n');
      expect(text).toContain('TETHER_PANEL_URL');
      expect(text).toContain('TETHER_NODE_TOKEN');
    }
    expect(() => loadConfig({ ...base, TETHER_PROXY: 'external' })).toThrow(/TETHER_CADDY_ADMIN_URL/);
    expect(() => loadConfig({ ...base, TETHER_RECONNECT_MIN_MS: '5000', TETHER_RECONNECT_MAX_MS: '100' })).toThrow(/must not exceed/);
    expect(() => loadConfig({ ...base, TETHER_AGENT_IDLE_MS: 'soon' })).toThrow(/whole number/);
  });
});

describe('the proxy without its answerer', () => {
  const missing = { TETHER_PROXY_KNOTD: '/nonexistent/knotd', TETHER_PROXY_KNOTC: '/nonexistent/knotc' };

  it('refuses to start when neither knotd nor (container mode) an answerer image is there, naming the ways out', () => {
    expect(() => loadConfig({ ...base, ...missing, TETHER_PROXY: 'container' })).toThrow(
      /TETHER_PROXY=container needs the answerer, knotd: no \/nonexistent\/knotd and no \/nonexistent\/knotc \(apt-get install knot, or set TETHER_ANSWERER_IMAGE .*infra\/answerer\/build-image\.sh\), or set TETHER_PROXY=none/,
    );
    const external = { ...base, ...missing, TETHER_PROXY: 'external', TETHER_CADDY_ADMIN_URL: 'http://127.0.0.1:2019' };
    expect(() => loadConfig(external)).toThrow(/TETHER_PROXY=external needs the answerer, knotd: no \/nonexistent\/knotd/);
    // Only the container runs an image: external mode is not told to set one.
    expect(() => loadConfig(external)).not.toThrow(/TETHER_ANSWERER_IMAGE/);
    expect(() => loadConfig({ ...base, ...missing, TETHER_PROXY: 'container', TETHER_PROXY_KNOTD: process.execPath })).toThrow(/no \/nonexistent\/knotc \(/);
  });

  it('starts with an answerer image (container mode), with knotd and knotc present, or without a proxy', () => {
    expect(loadConfig({ ...base, ...missing, TETHER_PROXY: 'container', TETHER_ANSWERER_IMAGE: 'tether/answerer:local' }).proxy.answererImage).toBe('tether/answerer:local');
    expect(loadConfig({ ...base, ...missing, TETHER_PROXY: 'container', TETHER_PROXY_KNOTD: process.execPath, TETHER_PROXY_KNOTC: process.execPath }).proxy.kind).toBe('container');
    expect(loadConfig({ ...base, ...missing, TETHER_PROXY: 'none' }).proxy.kind).toBe('none');
  });
});

describe('TETHER_PROXY_ROUTING, gone', () => {
  const knot = { TETHER_PROXY_KNOTD: process.execPath, TETHER_PROXY_KNOTC: process.execPath };

  it('config is refused with one line that says the mode is gone and what to remove; static changes nothing', () => {
    let problems: string[] = [];
    try {
      loadConfig({ ...base, ...knot, TETHER_PROXY: 'container', TETHER_PROXY_ROUTING: 'config' });
    } catch (err) {
      problems = (err as ConfigError).problems;
    }
    expect(problems).toEqual([ROUTING_CONFIG_GONE]);
    expect(ROUTING_CONFIG_GONE).not.toContain('\n');
    expect(ROUTING_CONFIG_GONE).toMatch(/per-route config mode is gone.*remove TETHER_PROXY_ROUTING/);
    // Refused even without a proxy: the .env still says something that is no longer true.
    expect(() => loadConfig({ ...base, TETHER_PROXY: 'none', TETHER_PROXY_ROUTING: 'config' })).toThrow(/TETHER_PROXY_ROUTING=config/);
    const quiet = loadConfig({ ...base, ...knot, TETHER_PROXY: 'container', TETHER_PROXY_ROUTING: 'static' }).proxy;
    expect(quiet).toEqual(loadConfig({ ...base, ...knot, TETHER_PROXY: 'container' }).proxy);
    expect(() => loadConfig({ ...base, TETHER_PROXY_ROUTING: 'dynamic' })).toThrow(/TETHER_PROXY_ROUTING/);
  });
});

describe('TETHER_PROTOCOL_VERSION_MAX', () => {
  it('defaults to every version this build speaks and takes a pin within MIN_PROTOCOL_VERSION..PROTOCOL_VERSION only', () => {
    expect(loadConfig(base).protocolVersions).toEqual({ min: MIN_PROTOCOL_VERSION, max: PROTOCOL_VERSION });
    expect(loadConfig({ ...base, TETHER_PROTOCOL_VERSION_MAX: String(MIN_PROTOCOL_VERSION) }).protocolVersions.max).toBe(MIN_PROTOCOL_VERSION);
    for (const bad of [String(MIN_PROTOCOL_VERSION - 1), String(PROTOCOL_VERSION + 1), 'latest']) {
      expect(() => loadConfig({ ...base, TETHER_PROTOCOL_VERSION_MAX: bad })).toThrow(/TETHER_PROTOCOL_VERSION_MAX/);
    }
  });
});

describe('route probes under the ACME issuer: DNS check and issuance log settings', () => {
  it('defaults: the interfaces\' addresses (null), the system resolver, 30 s of cache, the log under the state folder', () => {
    const config = loadConfig(base);
    expect(config.routeProbes).toMatchObject({ publicAddresses: null, dnsServer: null, dnsCacheMs: 30_000 });
    expect(config.proxy.issuanceLog).toBe(path.join(config.stateDir, 'caddy-logs', 'issuance.log'));
    expect(loadConfig({ ...base, TETHER_PROXY_ISSUANCE_LOG: '/var/log/caddy/issuance.log' }).proxy.issuanceLog).toBe('/var/log/caddy/issuance.log');
    expect(() => loadConfig({ ...base, TETHER_PROXY_ISSUANCE_LOG: 'relative.log' })).toThrow(/TETHER_PROXY_ISSUANCE_LOG/);
  });

  it('TETHER_PUBLIC_ADDRESSES: IPv4 and IPv6 separated by commas; anything else is refused by name', () => {
    expect(loadConfig({ ...base, TETHER_PUBLIC_ADDRESSES: '203.0.113.7, 2001:db8::7' }).routeProbes.publicAddresses).toEqual(['203.0.113.7', '2001:db8::7']);
    for (const bad of ['shop.example.com', '203.0.113.7,999.1.1.1', ' , ']) {
      expect(() => loadConfig({ ...base, TETHER_PUBLIC_ADDRESSES: bad })).toThrow(/TETHER_PUBLIC_ADDRESSES/);
    }
  });

  it('TETHER_ROUTE_PROBE_DNS_SERVER: ip, ip:port, [v6]:port or a bare v6; port 1-65535; names refused', () => {
    for (const good of ['127.0.0.1', '127.0.0.1:5353', '[::1]:53', '::1', '127.0.0.1:65535', '127.0.0.1:1']) {
      expect(loadConfig({ ...base, TETHER_ROUTE_PROBE_DNS_SERVER: good }).routeProbes.dnsServer).toBe(good);
    }
    for (const bad of ['dns.example.com', '127.0.0.1:0', '127.0.0.1:65536', 'udp/127.0.0.1:53']) {
      expect(() => loadConfig({ ...base, TETHER_ROUTE_PROBE_DNS_SERVER: bad }), bad).toThrow(/TETHER_ROUTE_PROBE_DNS_SERVER/);
    }
    expect(loadConfig({ ...base, TETHER_ROUTE_PROBE_DNS_CACHE_MS: '0' }).routeProbes.dnsCacheMs).toBe(0);
    expect(() => loadConfig({ ...base, TETHER_ROUTE_PROBE_DNS_CACHE_MS: '3600001' })).toThrow(/TETHER_ROUTE_PROBE_DNS_CACHE_MS/);
  });
});

describe('self-fencing (workload.fence)', () => {
  it('TETHER_FENCE_AFTER_MS: 60 s by default, 100 ms to a day, anything else refused by name', () => {
    expect(loadConfig(base).fence).toEqual({ afterMs: 60_000 });
    expect(loadConfig({ ...base, TETHER_FENCE_AFTER_MS: '600' }).fence).toEqual({ afterMs: 600 });
    for (const bad of ['99', '0', '-1', '1.5', 'soon', '86400001']) expect(() => loadConfig({ ...base, TETHER_FENCE_AFTER_MS: bad }), bad).toThrow(/TETHER_FENCE_AFTER_MS/);
  });
});

describe('cross-node routing (routing.remote)', () => {
  it('off by default: no private address, probes every second bounded by 500 ms', () => {
    expect(loadConfig(base).remote).toEqual({ privateAddress: null, probeIntervalMs: 1_000, probeTimeoutMs: 500 });
    expect(loadConfig({ ...base, TETHER_REMOTE_PROBE_INTERVAL_MS: '250', TETHER_REMOTE_PROBE_TIMEOUT_MS: '100' }).remote).toMatchObject({ probeIntervalMs: 250, probeTimeoutMs: 100 });
    expect(() => loadConfig({ ...base, TETHER_REMOTE_PROBE_INTERVAL_MS: '0' })).toThrow(/TETHER_REMOTE_PROBE_INTERVAL_MS/);
  });

  it('TETHER_PRIVATE_ADDRESS: one IPv4 or IPv6 literal, IPv6 in one spelling; names, brackets, zones, lists and wildcards refused by name', () => {
    expect(loadConfig({ ...base, TETHER_PRIVATE_ADDRESS: '10.20.0.7' }).remote.privateAddress).toBe('10.20.0.7');
    expect(loadConfig({ ...base, TETHER_PRIVATE_ADDRESS: 'FD00:0:0::7' }).remote.privateAddress).toBe('fd00::7');
    for (const bad of ['node-1.internal', '[fd00::7]', 'fe80::1%eth0', '10.0.0.1,10.0.0.2', '10.0.0.256', '0.0.0.0', '::', '0::0']) {
      expect(() => loadConfig({ ...base, TETHER_PRIVATE_ADDRESS: bad }), bad).toThrow(/TETHER_PRIVATE_ADDRESS/);
    }
    try {
      loadConfig({ ...base, TETHER_PRIVATE_ADDRESS: '0.0.0.0' });
    } catch (err) {
      expect((err as ConfigError).problems).toEqual([expect.stringContaining('wildcard')]);
    }
  });
});

describe('docs/operations.md', () => {
  it('lists every environment variable this app reads', () => {
    expect(undocumentedEnvVars(ENV_VARS)).toEqual([]);
    expect(ENV_VARS.length).toBeGreaterThan(10);
  });
});
