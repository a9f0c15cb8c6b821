// Which CLI fits which panel. The panel names its version in a header on every
// answer; the CLI compares it with its own before it trusts an answer. Versions
// are semver: the same major fits, and while the major is 0 the same minor
// (0.1.x and 0.2.x may differ in the API the CLI relies on).

/** The response header carrying the panel's version (docs/api.md). */
export const PANEL_VERSION_HEADER = 'x-tether-panel-version';

const SEMVER = /^(\d+)\.(\d+)\.(\d+)(?:[-+].*)?$/;

/** Whether a CLI of version `cli` works with a panel of version `panel`; false when either is not a version. */
export function versionsFit(cli: string, panel: string): boolean {
  const a = SEMVER.exec(cli);
  const b = SEMVER.exec(panel);
  if (!a || !b) return false;
  if (a[1] !== b[1]) return false;
  return a[1] !== '0' || a[2] === b[2];
}

/** The line of versions that fit `version`, for messages: `0.1.x`, `2.x`. */
export function fittingLine(version: string): string {
  const m = SEMVER.exec(version);
  if (!m) return version;
  return m[1] === '0' ? `0.${m[2]}.x` : `${m[1]}.x`;
}
