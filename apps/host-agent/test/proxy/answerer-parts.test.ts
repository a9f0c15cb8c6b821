import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { answererRootUsable } from '../../src/proxy/knot-image.js';
import { upstreamByAddress } from '../../src/proxy/docker-endpoints.js';
import { knotConf, knotPaths, zoneText } from '../../src/proxy/knot-files.js';
import { localImageTag, textFile, treeFiles } from '../../src/proxy/local-image.js';
import { renderStaticConfig } from '../../src/proxy/static-render.js';

// The pure parts of the answerer in both proxy modes (no Docker, no knotd):
// where knotd keeps its files, the content-addressed image tag, the canary
// upstream by address, and what the container-mode config points Caddy at.

describe('knotd files', () => {
  it('a process keeps pid file and socket in its folder; a container keeps them in its own /run/knot', () => {
    const process = knotPaths('/s/answerer');
    expect(process).toMatchObject({ conf: '/s/answerer/knot.conf', pid: '/s/answerer/knot.pid', socket: '/s/answerer/knot.sock', zone: '/s/answerer/zones/rt.tether.internal.zone' });
    const container = knotPaths('/s/answerer', '/run/knot');
    expect(container).toMatchObject({ conf: '/s/answerer/knot.conf', pid: '/run/knot/knot.pid', socket: '/run/knot/knot.sock', zone: '/s/answerer/zones/rt.tether.internal.zone' });
    const conf = knotConf(container, { host: '0.0.0.0', port: 5399 });
    expect(conf).toContain('    listen: 0.0.0.0@5399');
    expect(conf).toContain('    pidfile: "/run/knot/knot.pid"');
    expect(conf).toContain('    listen: "/run/knot/knot.sock"');
  });

  it('the zone carries the serial and the health record once', () => {
    const zone = zoneText(['health A 10.0.0.1', 'a.h SRV 10 10 80 c-1.e'], 7);
    expect(zone).toContain('@ SOA ns hostmaster 7 60 60 60 1');
    expect(zone.match(/^health /gm)).toEqual(['health ']);
    expect(zone).toContain('a.h SRV 10 10 80 c-1.e');
  });
});

describe('local image tag', () => {
  const files = [textFile('/b', 'two'), textFile('/a', 'one')];
  it('is the same for the same inputs in any order, and moves with content and recipe', () => {
    const tag = localImageTag({ repository: 'tether/answerer', recipeVersion: '1', files });
    expect(tag).toMatch(/^tether\/answerer:[0-9a-f]{16}$/);
    expect(localImageTag({ repository: 'tether/answerer', recipeVersion: '1', files: [...files].reverse() })).toBe(tag);
    expect(localImageTag({ repository: 'tether/answerer', recipeVersion: '2', files })).not.toBe(tag);
    expect(localImageTag({ repository: 'tether/answerer', recipeVersion: '1', files: [textFile('/b', 'two'), textFile('/a', 'One')] })).not.toBe(tag);
  });
});

describe('canary upstream by address', () => {
  it('keeps an address, looks a name up, and says null for a name that does not resolve', async () => {
    expect(await upstreamByAddress('10.1.2.3:9081')).toBe('10.1.2.3:9081');
    expect(await upstreamByAddress('[::1]:9081')).toBe('[::1]:9081');
    expect(await upstreamByAddress('localhost:9081')).toMatch(/^(127\.0\.0\.1|\[::1\]):9081$/);
    expect(await upstreamByAddress('no-such-host.invalid:9081')).toBeNull();
  });
});

describe('static routing in container mode', () => {
  it('is accepted with TETHER_PROXY=container, with an optional answerer image', () => {
    const base = { TETHER_PANEL_URL: 'http://127.0.0.1:8080', TETHER_NODE_TOKEN: 'n'.repeat(32), TETHER_PROXY: 'container' };
    expect(loadConfig(base).proxy).toMatchObject({ kind: 'container', answererListen: { port: 5399 } });
    expect(loadConfig({ ...base, TETHER_ANSWERER_IMAGE: 'tether/answerer:given' }).proxy.answererImage).toBe('tether/answerer:given');
  });

  it("Caddy's config names the answerer on its own loopback and the domain files in its data folder", () => {
    const { json } = renderStaticConfig({
      admin: { listen: 'unix//run/tether-caddy/admin.sock' },
      tls: 'auto',
      httpPort: 80,
      httpsPort: 443,
      canary: null,
      answerer: 'udp/127.0.0.1:5399',
      lookupRefreshMs: 1_000,
      answersDir: '/data/answers',
      askPort: 9082,
      issuer: 'internal',
    });
    // Every file matcher's root, subroutes included.
    const roots: string[] = [];
    const walk = (v: unknown): void => {
      if (Array.isArray(v)) v.forEach(walk);
      else if (v && typeof v === 'object') {
        for (const [k, inner] of Object.entries(v)) {
          if (k === 'file' && inner && typeof (inner as { root?: unknown }).root === 'string') roots.push((inner as { root: string }).root);
          walk(inner);
        }
      }
    };
    walk((JSON.parse(json) as { apps: { http: unknown } }).apps.http);
    // Routing (lookups, prefixed) and the on-demand TLS ask (domains) all read the mounted folder.
    expect(new Set(roots)).toEqual(new Set(['lookups', 'prefixed', 'domains'].map((d) => `/data/answers/${d}`)));
    expect(roots.filter((r) => r === '/data/answers/domains')).toHaveLength(1);
    expect(json).toContain('"addresses":["udp/127.0.0.1:5399"]');
    expect(json).not.toContain('/tmp');
  });
});

describe('the answerer tree the agent image carries (TETHER_ANSWERER_ROOT)', () => {
  it('is enough for container mode without knot on the host, and every file of it goes into the answerer image', async () => {
    const root = await mkdtemp(path.join(os.tmpdir(), 'tether-answerer-root-'));
    try {
      const base = { TETHER_PANEL_URL: 'http://127.0.0.1:8080', TETHER_NODE_TOKEN: 'n'.repeat(32), TETHER_PROXY: 'container', TETHER_PROXY_KNOTD: '/nonexistent/knotd', TETHER_PROXY_KNOTC: '/nonexistent/knotc' };
      // Half a tree is not a tree: refused as before.
      await mkdir(path.join(root, 'usr', 'sbin'), { recursive: true });
      await writeFile(path.join(root, 'usr', 'sbin', 'knotd'), 'd', { mode: 0o755 });
      expect(() => loadConfig({ ...base, TETHER_ANSWERER_ROOT: root })).toThrow(/needs the answerer/);
      await writeFile(path.join(root, 'usr', 'sbin', 'knotc'), 'c', { mode: 0o755 });
      await mkdir(path.join(root, 'lib', 'x86_64-linux-gnu'), { recursive: true });
      await writeFile(path.join(root, 'lib', 'x86_64-linux-gnu', 'libknot.so.13'), 'l', { mode: 0o644 });
      expect(loadConfig({ ...base, TETHER_ANSWERER_ROOT: root }).proxy.answererRoot).toBe(root);
      expect(answererRootUsable(root)).toBe(true);
      expect((await treeFiles(root)).map((f) => [f.target, f.mode, f.content.toString()])).toEqual([
        ['/lib/x86_64-linux-gnu/libknot.so.13', 0o644, 'l'],
        ['/usr/sbin/knotc', 0o755, 'c'],
        ['/usr/sbin/knotd', 0o755, 'd'],
      ]);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
