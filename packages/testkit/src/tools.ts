import { aptInstall, commandWorks, requireSystem, type Requirement } from './system.js';

// Tools the dashboard and Prometheus suites drive: promtool (Debian's
// prometheus package) and Debian's chromium (driven by playwright-core; a
// downloaded browser is not reachable here).

let promtool: Promise<Requirement> | undefined;
let chromium: Promise<Requirement> | undefined;
let knot: Promise<Requirement> | undefined;

export const CHROMIUM_PATH = '/usr/bin/chromium';

/** Flags that let Debian's chromium run headless as root in a container (docs: shared ENVIRONMENT). */
export const CHROMIUM_ARGS: readonly string[] = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'];

export function ensurePromtool(): Promise<Requirement> {
  promtool ??= requireSystem('promtool', {
    hint: 'no promtool on PATH (Debian package prometheus)',
    probe: () => commandWorks('promtool', ['--version']),
    install: () => aptInstall(['prometheus']),
  });
  return promtool;
}

export function ensureChromium(): Promise<Requirement> {
  chromium ??= requireSystem('chromium', {
    hint: `no ${CHROMIUM_PATH} (Debian package chromium)`,
    probe: () => commandWorks(CHROMIUM_PATH, ['--version']),
    install: () => aptInstall(['chromium']),
  });
  return chromium;
}

/** knotd and knotc (Debian's knot): the static proxy's answerer (every host agent that runs a proxy). */
export function ensureKnot(): Promise<Requirement> {
  knot ??= requireSystem('knotd', {
    hint: 'no knotd on PATH (Debian package knot)',
    probe: async () => (await commandWorks('knotd', ['-V'])) && (await commandWorks('knotc', ['--version'])),
    install: () => aptInstall(['knot']),
  });
  return knot;
}

let pebble: Promise<Requirement> | undefined;

/** pebble and pebble-challtestsrv (Debian's pebble): Let's Encrypt's test ACME CA and its mock DNS server. */
export function ensurePebble(): Promise<Requirement> {
  pebble ??= requireSystem('pebble', {
    hint: 'no pebble on PATH (Debian package pebble)',
    // Both print their usage and exit 2 on -h: being on PATH is the probe.
    probe: () => commandWorks('sh', ['-c', 'command -v pebble && command -v pebble-challtestsrv']),
    install: () => aptInstall(['pebble']),
  });
  return pebble;
}
