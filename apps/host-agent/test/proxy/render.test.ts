import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { canonicalJson, matchesCanonicalJson } from '../../src/proxy/canonical-json.js';
import { CADDY_CONTAINER_ADMIN, renderBootstrapConfig } from '../../src/proxy/index.js';

// The settings-only pieces of Caddy's configs (the static config itself: static-answers.test.ts).

describe('bootstrap config', () => {
  it('infra/caddy/bootstrap.json is exactly what the image is built with', () => {
    const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');
    const file = readFileSync(path.join(repoRoot, 'infra/caddy/bootstrap.json'), 'utf8');
    expect(file).toBe(`${renderBootstrapConfig(CADDY_CONTAINER_ADMIN)}\n`);
  });
});

describe('canonical comparison with what Caddy reports', () => {
  it('treats key order, whitespace and Go-style escaping as the same config, and any value change as different', () => {
    // What Caddy reports back of a config with an `&` in a matcher value: Go escapes it as \u0026.
    const expected = canonicalJson({ admin: { listen: '127.0.0.1:2019' }, apps: { http: { servers: { tether: { routes: [{ match: [{ path: ['/x&y'] }] }] } } } } });
    const reverseKeys = (v: unknown): unknown =>
      Array.isArray(v) ? v.map(reverseKeys) : v && typeof v === 'object' ? Object.fromEntries(Object.entries(v).reverse().map(([k, x]) => [k, reverseKeys(x)])) : v;
    const reordered = JSON.stringify(reverseKeys(JSON.parse(expected)), null, 2);
    expect(reordered.startsWith('{\n  "apps"')).toBe(true);
    expect(matchesCanonicalJson(reordered, expected)).toBe(true);
    expect(matchesCanonicalJson(expected.replace('&', '\\u0026'), expected)).toBe(true);
    expect(matchesCanonicalJson(`${expected}\n`, expected)).toBe(true);
    expect(matchesCanonicalJson(expected.replace('/x\u0026y', '/x&z'), expected)).toBe(false);
    expect(matchesCanonicalJson('null', expected)).toBe(false);
    expect(matchesCanonicalJson('not json', expected)).toBe(false);
    expect(canonicalJson({ b: [{ d: 1, c: 2 }], a: { __proto__: 1 } })).toBe('{"a":{},"b":[{"c":2,"d":1}]}');
    expect(canonicalJson(JSON.parse('{"b":1,"__proto__":{"x":1}}'))).toBe('{"__proto__":{"x":1},"b":1}');
  });
});
