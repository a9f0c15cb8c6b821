import { appendFileSync, mkdtempSync, renameSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { describeIssuanceError, IssuanceErrors, IssuanceLog, LineSplitter, parseIssuanceLine, RouteProber } from '../../src/route-probes/index.js';
import { renderStaticConfig } from '../../src/proxy/index.js';
import { issuanceLogPaths } from '../../src/proxy/issuance-logging.js';
import { silentLogger } from '../proxy/helpers/harness.js';

// The issuance log follower: lines as Caddy 2.6.2 wrote them against pebble
// (copied from a run of route-acme.test.ts), parsed and kept per domain
// without I/O; then the follower on a real file that is appended to, rotated
// and truncated.

const line = (o: Record<string, unknown>) => JSON.stringify(o);
const attempt = line({ level: 'info', ts: 1796200058.8990674, logger: 'tls.obtain', msg: 'obtaining certificate', identifier: 'stranded.acme.test' });
const refused = line({
  level: 'error', ts: 1796200059.159749, logger: 'http.acme_client', msg: 'challenge failed', identifier: 'stranded.acme.test', challenge_type: 'http-01', status_code: 400,
  problem_type: 'urn:ietf:params:acme:error:connection',
  error: 'Get "http://stranded.acme.test:36057/.well-known/acme-challenge/SzFR": dial tcp 127.0.0.3:36057: connect: connection refused',
});
const validating = line({
  level: 'error', ts: 1796200059.1598015, logger: 'http.acme_client', msg: 'validating authorization', identifier: 'stranded.acme.test',
  error: 'authorization failed: HTTP 400 urn:ietf:params:acme:error:connection - Get "http://stranded.acme.test:36057/.well-known/acme-challenge/SzFR": dial tcp 127.0.0.3:36057: connect: connection refused',
});
const alpn = line({
  level: 'error', ts: 1796200060.417481, logger: 'http.acme_client', msg: 'challenge failed', identifier: 'stranded.acme.test', challenge_type: 'tls-alpn-01', status_code: 403,
  problem_type: 'urn:ietf:params:acme:error:unauthorized', error: 'Failed to connect to 127.0.0.3:34325 for the tls-alpn-01 challenge',
});
const noSolvers = line({
  level: 'error', ts: 1796200061.4225276, logger: 'tls.obtain', msg: 'could not get certificate from issuer', identifier: 'stranded.acme.test', issuer: '127.0.0.1:33917-dir',
  error: '[stranded.acme.test] solving challenges: stranded.acme.test: no solvers available for remaining challenges (configured=[http-01 tls-alpn-01] offered=[http-01 dns-01 tls-alpn-01] remaining=[dns-01])',
});
const obtained = line({ level: 'info', ts: 1796200120.6803336, logger: 'tls.obtain', msg: 'certificate obtained successfully', identifier: 'stranded.acme.test' });
const refusedMessage =
  'challenge http-01 failed: HTTP 400 urn:ietf:params:acme:error:connection - Get "http://stranded.acme.test:36057/.well-known/acme-challenge/SzFR": dial tcp 127.0.0.3:36057: connect: connection refused';

const keep = (lines: string[]) => {
  const errors = new IssuanceErrors();
  for (const l of lines) {
    const e = parseIssuanceLine(l);
    if (e) errors.note(e);
  }
  return errors;
};

describe('parseIssuanceLine', () => {
  it('reads attempts, the CA\'s errors (with when) and certificates obtained; nothing else', () => {
    expect(parseIssuanceLine(attempt)).toEqual({ kind: 'attempt', domain: 'stranded.acme.test' });
    expect(parseIssuanceLine(refused)).toEqual({ kind: 'error', domain: 'stranded.acme.test', rank: 2, error: { message: refusedMessage, at: '2026-12-02T08:27:39.159Z' } });
    expect(parseIssuanceLine(noSolvers)).toMatchObject({ kind: 'error', rank: 1 });
    expect(parseIssuanceLine(obtained)).toEqual({ kind: 'obtained', domain: 'stranded.acme.test' });
    for (const other of [
      line({ level: 'info', logger: 'tls.obtain', msg: 'acquiring lock', identifier: 'x.test' }),
      line({ level: 'info', logger: 'tls.on_demand', msg: 'obtaining new certificate', server_name: 'x.test' }),
      line({ level: 'error', logger: 'tls.obtain', msg: 'will retry', error: 'x' }),
      line({ level: 'warn', logger: 'http.acme_client', msg: 'challenge failed', identifier: 'x.test', error: 'y' }),
      'not json', '[1,2]', 'null', '{"msg":', '',
    ]) expect(parseIssuanceLine(other), other).toBeNull();
  });
});

describe('IssuanceErrors', () => {
  it('keeps the refused challenge of an attempt, not the summaries after it; an obtained certificate clears it', () => {
    const errors = keep([attempt, refused, validating, alpn, noSolvers]);
    expect(errors.errorFor('stranded.acme.test')).toEqual({ message: refusedMessage, at: '2026-12-02T08:27:39.159Z' });
    expect(errors.errorFor('STRANDED.acme.test')?.message).toBe(refusedMessage);
    expect(errors.errorFor('other.acme.test')).toBeNull();
    expect(keep([attempt, refused, obtained]).errorFor('stranded.acme.test')).toBeNull();
  });

  it('the next attempt\'s first error replaces the previous one; a summary alone stays until a challenge error comes', () => {
    const next = line({ ...JSON.parse(alpn), ts: 1796200200 });
    const errors = keep([attempt, refused, attempt, next]);
    expect(errors.errorFor('stranded.acme.test')?.message).toContain('Failed to connect to 127.0.0.3:34325');
    const summary = keep([attempt, noSolvers]);
    expect(summary.errorFor('stranded.acme.test')?.message).toContain('no solvers available');
    expect(keep([attempt, noSolvers, refused]).errorFor('stranded.acme.test')?.message).toBe(refusedMessage);
  });

  it('says it in one wording', () => {
    expect(describeIssuanceError({ message: 'm', at: '2026-12-02T08:27:39.159Z' })).toBe('certificate issuance failed (2026-12-02T08:27:39.159Z): m');
  });
});

describe('LineSplitter', () => {
  it('whole lines only; a partial line waits; an overlong line is dropped whole, the next is kept', () => {
    const s = new LineSplitter(10);
    expect(s.push('ab\ncd')).toEqual(['ab']);
    expect(s.push('e\n')).toEqual(['cde']);
    expect(s.push('0123456789')).toEqual([]);
    expect(s.push('X')).toEqual([]);
    expect(s.push('more\nok\n')).toEqual(['ok']);
    expect(s.push('0123456789\n')).toEqual(['0123456789']);
  });
});

describe('IssuanceLog (a real file)', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'tether-issuance-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('no file yet, appended lines, garbage, rotation (the old file read to its end) and truncation', async () => {
    const file = path.join(dir, 'issuance.log');
    const log = new IssuanceLog({ path: file, pollMs: 60_000, logger: silentLogger });
    await log.poll();
    expect(log.errorFor('stranded.acme.test')).toBeNull();
    writeFileSync(file, `garbage\n${attempt}\n${refused.slice(0, 40)}`);
    await log.poll();
    expect(log.errorFor('stranded.acme.test')).toBeNull();
    appendFileSync(file, `${refused.slice(40)}\n`);
    await log.poll();
    expect(log.errorFor('stranded.acme.test')?.message).toBe(refusedMessage);
    // Rotation: the obtained line lands in the old file just before it is renamed; a new file starts.
    appendFileSync(file, `${obtained}\n`);
    renameSync(file, path.join(dir, 'issuance-1.log'));
    writeFileSync(file, `${line({ ...JSON.parse(refused), identifier: 'other.acme.test' })}\n`);
    await log.poll();
    expect(log.errorFor('stranded.acme.test')).toBeNull();
    expect(log.errorFor('other.acme.test')).not.toBeNull();
    // Truncated in place and written again: read from its start.
    truncateSync(file, 0);
    await log.poll();
    appendFileSync(file, `${attempt}\n${alpn}\n`);
    await log.poll();
    expect(log.errorFor('stranded.acme.test')?.message).toContain('tls-alpn-01');
    await log.stop();
  });

  it('the prober\'s certificate carries the issuance error in the CA\'s words, live, until it clears', async () => {
    const errors = keep([attempt, refused]);
    const prober = new RouteProber({
      intervalMs: 60_000,
      timeoutMs: 200,
      ratePerSecond: 20,
      // Nothing listens on port 1: the handshake fails, as it does while issuance fails.
      target: async () => ({ host: '127.0.0.1', port: 1, tls: true }),
      logger: silentLogger,
      issuanceError: (d) => errors.errorFor(d),
    });
    prober.setRoutes([{ domain: 'stranded.acme.test', pathPrefix: null }]);
    await prober.probeNext();
    expect(prober.results()[0]!.certificate!.lastError).toBe(`certificate issuance failed (2026-12-02T08:27:39.159Z): ${refusedMessage}`);
    errors.note(parseIssuanceLine(obtained)!);
    expect(prober.results()[0]!.certificate!.lastError).toMatch(/ECONNREFUSED/);
  });
});

describe('the static config names the issuance log', () => {
  const settings = {
    admin: { listen: '127.0.0.1:2019' }, httpPort: 80, httpsPort: 443, tls: 'auto' as const, answerer: 'udp/127.0.0.1:5399',
    lookupRefreshMs: 1_000, answersDir: '/s/answers', askPort: 9082, issuer: 'acme' as const,
  };
  it('TLS auto with a path: one bounded JSON file log of the issuance loggers, no domain; without a path or with TLS off: none', () => {
    const config = JSON.parse(renderStaticConfig({ ...settings, issuanceLog: '/s/caddy-logs/issuance.log' }).json);
    expect(config.logging).toEqual({
      logs: {
        'tether-issuance': {
          encoder: { format: 'json' },
          include: ['tls.obtain', 'tls.renew', 'tls.issuance', 'tls.on_demand', 'http.acme_client'],
          writer: { filename: '/s/caddy-logs/issuance.log', output: 'file', roll_gzip: false, roll_keep: 1, roll_size_mb: 1 },
        },
      },
    });
    expect(JSON.parse(renderStaticConfig(settings).json).logging).toBeUndefined();
    expect(JSON.parse(renderStaticConfig({ ...settings, tls: 'off', issuanceLog: '/s/x.log' }).json).logging).toBeUndefined();
  });

  it('container mode: Caddy writes inside its bind-mounted data folder, the agent reads the host side of it', () => {
    expect(issuanceLogPaths({ kind: 'container', issuanceLog: '/ignored.log' }, '/state')).toEqual({ caddyPath: '/data/logs/issuance.log', agentPath: '/state/caddy/data/logs/issuance.log' });
    expect(issuanceLogPaths({ kind: 'external', issuanceLog: '/var/log/x.log' }, '/state')).toEqual({ caddyPath: '/var/log/x.log', agentPath: '/var/log/x.log' });
  });
});
