import { describe, expect, it } from 'vitest';
import { ConfigError } from '@tether/common';
import { loadConfig } from '../src/config.js';
import { DatabaseUrlError, parseDatabaseHosts } from '../src/db/database-hosts.js';

// DATABASE_URL with libpq's host list (issue 39): split once, each server a one-host URL node-postgres reads.

describe('parseDatabaseHosts', () => {
  it('splits a host list, keeps credentials, database and parameters, drops target_session_attrs', () => {
    const hosts = parseDatabaseHosts('postgresql://u:p%40ss@db-a:5433,db-b,[::1]:6000/tether?sslmode=disable&target_session_attrs=read-write');
    expect(hosts).toEqual([
      { host: 'db-a', port: 5433, url: 'postgresql://u:p%40ss@db-a:5433/tether?sslmode=disable' },
      { host: 'db-b', port: 5432, url: 'postgresql://u:p%40ss@db-b:5432/tether?sslmode=disable' },
      { host: '::1', port: 6000, url: 'postgresql://u:p%40ss@[::1]:6000/tether?sslmode=disable' },
    ]);
  });

  it('reads one host as a list of one', () => {
    expect(parseDatabaseHosts('postgres://tether@127.0.0.1/x')).toEqual([{ host: '127.0.0.1', port: 5432, url: 'postgres://tether@127.0.0.1:5432/x' }]);
  });

  it.each([
    ['postgresql://u@/db', /no host/],
    ['postgresql://u@a:5432,,b/db', /empty host/],
    ['postgresql://u@a:0/db', /port must be/],
    ['postgresql://u@a:99999/db', /port must be/],
    ['postgresql://u@a:x/db', /port must be/],
    ['postgresql://u@a:5432,a:5432/db', /twice/],
    ['postgresql://u@[::1/db', /unclosed/],
    ['mysql://a/db', /must start with/],
  ])('refuses %s', (url, message) => {
    expect(() => parseDatabaseHosts(url)).toThrow(DatabaseUrlError);
    expect(() => parseDatabaseHosts(url)).toThrow(message);
  });

  it('a bad host list stops the panel at start, naming the variable and never the password', () => {
    let error: unknown;
    try {
      loadConfig({ DATABASE_URL: 'postgresql://tether:s3cret@a:5432,,b/tether' });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect(String((error as Error).message)).toMatch(/DATABASE_URL: has an empty host/);
    expect(String((error as Error).message)).not.toContain('s3cret');
  });
});
