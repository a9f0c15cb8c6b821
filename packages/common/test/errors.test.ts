import { describe, expect, it } from 'vitest';
import { catalogCodes, CodedError, ConfigError, defineErrorCatalog, errorCode, errorMessage, isCatalogued, mergeErrorCatalogs } from '../src/index.js';

class DiskFullError extends CodedError<'DISK_FULL'> {
  constructor(cause?: unknown) {
    super('DISK_FULL', 'the disk is full', { cause });
  }
}

describe('CodedError', () => {
  it('carries code, message, cause and the subclass name', () => {
    const cause = new Error('ENOSPC');
    const err = new DiskFullError(cause);
    expect(err).toBeInstanceOf(CodedError);
    expect(err).toBeInstanceOf(Error);
    expect(err.code).toBe('DISK_FULL');
    expect(err.message).toBe('the disk is full');
    expect(err.cause).toBe(cause);
    expect(err.name).toBe('DiskFullError');
    expect(String(err.stack)).toContain('DiskFullError: the disk is full');
    // No `cause` key at all when there is none (pino and util.inspect print what is there).
    expect(Object.hasOwn(new DiskFullError(), 'cause')).toBe(false);
    // `code` is an own enumerable property, so JSON and pino's err serializer keep it.
    expect(JSON.parse(JSON.stringify(err))).toMatchObject({ code: 'DISK_FULL' });
  });

  it('ConfigError is a coded error from its catalog', () => {
    const err = new ConfigError(['PORT: required']);
    expect(err).toBeInstanceOf(CodedError);
    expect(err.code).toBe('INVALID_CONFIG');
    expect(err.name).toBe('ConfigError');
  });

  it('errorMessage and errorCode read anything thrown', () => {
    expect(errorMessage(new DiskFullError())).toBe('the disk is full');
    expect(errorMessage('plain')).toBe('plain');
    expect(errorCode(new DiskFullError())).toBe('DISK_FULL');
    expect(errorCode(Object.assign(new Error('x'), { code: 'ECONNREFUSED' }))).toBe('ECONNREFUSED');
    expect(errorCode({ code: 5 })).toBeUndefined();
    expect(errorCode(null)).toBeUndefined();
    expect(errorCode(undefined)).toBeUndefined();
  });
});

describe('error catalogs', () => {
  it('freeze, name every code once and give CODES.X constants', () => {
    const catalog = defineErrorCatalog({ DISK_FULL: 'no space left', TIMEOUT: 'no answer in time' });
    expect(Object.isFrozen(catalog)).toBe(true);
    const CODES = catalogCodes(catalog);
    expect(CODES).toEqual({ DISK_FULL: 'DISK_FULL', TIMEOUT: 'TIMEOUT' });
    expect(isCatalogued(catalog, 'TIMEOUT')).toBe(true);
    expect(isCatalogued(catalog, 'toString')).toBe(false);
    expect(isCatalogued(catalog, 3)).toBe(false);
  });

  it('refuse a code that is not UPPER_SNAKE_CASE or too long', () => {
    expect(() => defineErrorCatalog({ diskFull: 'x' })).toThrow(/UPPER_SNAKE_CASE/);
    expect(() => defineErrorCatalog({ [`A${'B'.repeat(64)}`]: 'x' })).toThrow(/64/);
    expect(() => defineErrorCatalog({ [`A${'B'.repeat(63)}`]: 'x' })).not.toThrow();
  });

  it('merge areas and refuse a code defined twice', () => {
    const a = defineErrorCatalog({ A: 'a' });
    const b = defineErrorCatalog({ B: { status: 400 } });
    expect(mergeErrorCatalogs(a, b)).toEqual({ A: 'a', B: { status: 400 } });
    expect(() => mergeErrorCatalogs(a, defineErrorCatalog({ A: 'again' }))).toThrow('error code A is defined twice');
  });
});
