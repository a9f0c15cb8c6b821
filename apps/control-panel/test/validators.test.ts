import { describe, expect, it } from 'vitest';
import { domainProblem, MAX_PATH_PREFIX_LENGTH, PATH_PREFIX_PATTERN } from '../src/domain/host-names.js';
import { IMAGE_REFERENCE_PATTERN, isImageReference } from '../src/domain/image-reference.js';

// The grammars that guard what reaches proxy configuration and Docker. The
// API tests check the same rules end to end; these check every edge cheaply.

describe('domains (lowercase RFC 1123 host names)', () => {
  const valid = [
    'shop.example.com',
    'a.io',
    'x1.y2.z3',
    'xn--bcher-kva.example',
    '0-0.example.com',
    `${'a'.repeat(63)}.example.com`,
    // 253 characters exactly: 3 labels of 63, one of 61, separated by dots.
    `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`,
  ];
  const invalid: Array<[string, string]> = [
    ['', 'empty'],
    ['localhost', 'single label'],
    ['Shop.example.com', 'uppercase'],
    ['shop.EXAMPLE.com', 'uppercase'],
    ['shop..example.com', 'empty label'],
    ['.example.com', 'leading dot (empty label)'],
    ['example.com.', 'trailing dot (empty label)'],
    ['-shop.example.com', 'leading hyphen'],
    ['shop-.example.com', 'trailing hyphen'],
    ['shop.example.com-', 'trailing hyphen in last label'],
    ['sh op.example.com', 'space'],
    [' shop.example.com', 'leading space'],
    ['shop.example.com ', 'trailing space'],
    ['shop"example.com', 'double quote'],
    ["shop'example.com", 'single quote'],
    ['shop.example.com/path', 'slash'],
    ['shop\\example.com', 'backslash'],
    ['shop{example}.com', 'braces'],
    ['shop.example.com}', 'closing brace'],
    ['{$host}.example.com', 'placeholder'],
    ['shop.example.com\n', 'newline'],
    ['shop.exa\u0000mple.com', 'NUL'],
    ['shop.exa\u001bmple.com', 'escape'],
    ['shop.exa\u007fmple.com', 'DEL'],
    ['bücher.example', 'unicode (must be punycode)'],
    ['shop.ex\u00e1mple.com', 'unicode'],
    ['ѕhop.example.com', 'cyrillic homoglyph'],
    ['*.example.com', 'wildcard'],
    ['shop_1.example.com', 'underscore'],
    ['shop.example.com:443', 'port'],
    ['1.2.3.4', 'IPv4 address'],
    ['example.123', 'numeric top label'],
    [`${'a'.repeat(64)}.example.com`, 'label of 64'],
    [`${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(62)}`, '254 characters'],
    [`${'a.'.repeat(200)}com`, 'over 253 characters'],
  ];

  it.each(valid)('accepts %s', (domain) => {
    expect(domainProblem(domain)).toBeNull();
  });

  it.each(invalid)('refuses %j (%s)', (domain) => {
    expect(domainProblem(domain)).toEqual(expect.any(String));
  });
});

describe('path prefixes', () => {
  // As the JSON schema validator applies it: a unicode-mode RegExp plus the length bound.
  const pattern = new RegExp(PATH_PREFIX_PATTERN, 'u');
  const check = (p: string) => p.length <= MAX_PATH_PREFIX_LENGTH && pattern.test(p);
  it.each(['/', '/api', '/api/', '/api/v1', '/a.b/c_d/~e-f', '/v1.2', '/...x'])('accepts %s', (p) => {
    expect(check(p)).toBe(true);
  });
  it.each([
    ['', 'empty'],
    ['api', 'no leading slash'],
    ['//api', 'double slash'],
    ['/api//v1', 'double slash inside'],
    ['/api v1', 'space'],
    ['/api"', 'quote'],
    ["/api'", 'single quote'],
    ['/{api}', 'braces'],
    ['/api/*', 'wildcard'],
    ['/api%2F', 'percent'],
    ['/api?x=1', 'query'],
    ['/api#x', 'fragment'],
    ['/api\\x', 'backslash'],
    ['/api\n', 'newline'],
    ['/ä', 'unicode'],
    ['/..', 'dot-dot segment'],
    ['/a/../b', 'dot-dot inside'],
    ['/./a', 'dot segment'],
    [`/${'a'.repeat(256)}`, 'too long'],
  ])('refuses %j (%s)', (p) => {
    expect(check(p)).toBe(false);
  });
});

describe('image references (distribution/reference grammar)', () => {
  it.each([
    'nginx',
    'nginx:1.27',
    'library/nginx:latest',
    'ghcr.io/acme/web:v1.2.3',
    'registry.example.com:5000/team/app',
    'localhost:5000/a/b/c:tag_1',
    'tether-test/busybox:1',
    `nginx@sha256:${'a'.repeat(64)}`,
    `ghcr.io/acme/web:v1@sha256:${'0'.repeat(64)}`,
    'my.registry/a__b/c-d/e.f:TAG-x.y',
  ])('accepts %s', (image) => {
    expect(isImageReference(image)).toBe(true);
  });

  it.each([
    '',
    'Nginx',
    'nginx:',
    'nginx: latest',
    'nginx latest',
    'nginx:la"test',
    'nginx;rm -rf /',
    '$(id)',
    'nginx:`id`',
    '-nginx',
    'nginx/',
    '/nginx',
    'a//b',
    'nginx:-tag',
    `nginx:${'a'.repeat(129)}`,
    'nginx@sha256:abc',
    'nginx\n',
    'ngïnx',
    `${'a'.repeat(513)}`,
  ])('refuses %j', (image) => {
    expect(isImageReference(image)).toBe(false);
  });

  it('answers hostile inputs in linear time (no catastrophic backtracking)', () => {
    const pattern = new RegExp(IMAGE_REFERENCE_PATTERN, 'u');
    const hostile = [
      `${'a'.repeat(500)}!`,
      `${'a-'.repeat(250)}!`,
      `${'a.'.repeat(250)}!`,
      `${'a_'.repeat(250)}!`,
      `${'a/'.repeat(250)}!`,
      `${'a1-'.repeat(166)}:`,
    ];
    for (const input of hostile) {
      const started = performance.now();
      expect(pattern.test(input)).toBe(false);
      expect(performance.now() - started).toBeLessThan(50);
    }
  });
});
