import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createCanary } from '../../src/canary/index.js';
import { removeTempDirs, silentLogger, tempDir } from '../proxy/helpers/harness.js';

// The canary's switch and its failure mode: off with 0 (or without a proxy),
// and an endpoint that cannot listen leaves the agent running without it.

afterAll(removeTempDirs);

const env = async (extra: Record<string, string>) =>
  loadConfig({
    TETHER_PANEL_URL: 'http://127.0.0.1:1',
    TETHER_NODE_TOKEN: 'x'.repeat(32),
    TETHER_STATE_DIR: await tempDir(),
    TETHER_PROXY: 'external',
    TETHER_CADDY_ADMIN_URL: 'http://127.0.0.1:2019',
    ...extra,
  });

describe('createCanary', () => {
  it('is on by default (10 s), off with TETHER_CANARY_INTERVAL_MS=0 and without a proxy', async () => {
    expect((await env({})).canary).toMatchObject({ intervalMs: 10_000, proxyPort: 9080, listen: '127.0.0.1:9081', upstream: '127.0.0.1:9081', proxyUrl: null });
    expect(await createCanary(await env({ TETHER_CANARY_INTERVAL_MS: '0' }), { logger: silentLogger, onDrop: () => undefined })).toBeNull();
    expect(await createCanary({ ...(await env({})), proxy: { ...(await env({})).proxy, kind: 'none' } }, { logger: silentLogger, onDrop: () => undefined })).toBeNull();
  });

  it('an endpoint address in use: no canary, no crash', async () => {
    const busy = net.createServer();
    await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
    const port = (busy.address() as { port: number }).port;
    try {
      expect(await createCanary(await env({ TETHER_CANARY_LISTEN: `127.0.0.1:${port}` }), { logger: silentLogger, onDrop: () => undefined })).toBeNull();
    } finally {
      await new Promise<void>((resolve) => busy.close(() => resolve()));
    }
  });

  it('listens where configured, and its monitor reports a canary that is not connected yet', async () => {
    const canary = await createCanary(await env({ TETHER_CANARY_LISTEN: '127.0.0.1:0' }), { logger: silentLogger, onDrop: () => undefined });
    try {
      expect(canary?.endpoint.port).toBeGreaterThan(0);
      expect(canary?.monitor.status()).toMatchObject({ connected: false, dropsTotal: 0 });
    } finally {
      await canary?.endpoint.close();
    }
  });
});

describe('canary settings', () => {
  it('refuses an endpoint or upstream that is not host:port (it goes into the proxy config as a dial address)', async () => {
    for (const bad of ['{env.X}:80', 'host', 'a b:80', 'host:80/path']) {
      await expect(env({ TETHER_CANARY_UPSTREAM: bad }), bad).rejects.toThrow(/TETHER_CANARY_UPSTREAM/);
    }
    await expect(env({ TETHER_CANARY_LISTEN: '0.0.0.0' })).rejects.toThrow(/TETHER_CANARY_LISTEN/);
    expect((await env({ TETHER_CANARY_UPSTREAM: '[fd00::1]:9081', TETHER_CANARY_LISTEN: '0.0.0.0:9081' })).canary).toMatchObject({ upstream: '[fd00::1]:9081', listen: '0.0.0.0:9081' });
  });
});
