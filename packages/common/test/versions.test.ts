import { describe, expect, it } from 'vitest';
import { fittingLine, versionsFit } from '../src/index.js';

describe('versionsFit', () => {
  it('0.x: the same minor fits, another minor does not', () => {
    expect(versionsFit('0.1.0', '0.1.7')).toBe(true);
    expect(versionsFit('0.1.3', '0.1.0')).toBe(true);
    expect(versionsFit('0.1.0', '0.2.0')).toBe(false);
    expect(versionsFit('0.2.0', '0.1.0')).toBe(false);
  });

  it('1.x and later: the same major fits', () => {
    expect(versionsFit('1.0.0', '1.9.2')).toBe(true);
    expect(versionsFit('1.4.0', '2.0.0')).toBe(false);
    expect(versionsFit('0.9.0', '1.0.0')).toBe(false);
    expect(versionsFit('1.2.0-rc.1', '1.0.0')).toBe(true);
  });

  it('anything that is not a version fits nothing', () => {
    expect(versionsFit('0.1.0', '')).toBe(false);
    expect(versionsFit('0.1.0', 'latest')).toBe(false);
    expect(versionsFit('0.1', '0.1.0')).toBe(false);
  });

  it('names the fitting line', () => {
    expect(fittingLine('0.1.4')).toBe('0.1.x');
    expect(fittingLine('2.3.0')).toBe('2.x');
  });
});
