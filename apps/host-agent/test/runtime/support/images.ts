import { WEB_HEALTHCHECK_IMAGE_CONFIG, WEB_IMAGE_CONFIG, WEB_SCRIPT, derivedImage } from '@tether/testkit';

// Local images for the runtime tests, made from the test kit's busybox image
// with `docker commit` (no registry): the kit's web program (WEB_SCRIPT, steered
// by MESSAGE, EXIT_CODE, UNHEALTHY, READY_AFTER), with and without health checks.

/** Healthy only once READY_AFTER has passed; failures before that fall in the start period and do not count. */
const READY_PROBE = { Test: ['CMD-SHELL', 'test -e /tmp/ready'], Interval: 200e6, Timeout: 2e9, Retries: 2, StartPeriod: 30e9 };
/** A probe whose first run is a minute away: health stays "starting". */
const SLOW_PROBE = { Test: ['CMD-SHELL', 'true'], Interval: 60e9, Timeout: 2e9, Retries: 1 };

const VARIANTS = {
  web: { repo: 'tether-test/web', config: WEB_IMAGE_CONFIG },
  webHealthcheck: { repo: 'tether-test/web-hc', config: WEB_HEALTHCHECK_IMAGE_CONFIG },
  webSlowHealthcheck: { repo: 'tether-test/web-slow-hc', config: { Cmd: ['sh', '-c', WEB_SCRIPT], Healthcheck: SLOW_PROBE } },
  webReadyLater: { repo: 'tether-test/web-ready-later', config: { Cmd: ['sh', '-c', WEB_SCRIPT], Healthcheck: READY_PROBE } },
} satisfies Record<string, { repo: string; config: Record<string, unknown> }>;

export type TestImages = { [K in keyof typeof VARIANTS]: string };

let images: Promise<TestImages> | undefined;

/** Builds (once per machine, safe in parallel) and names the runtime test images. */
export function ensureRuntimeImages(): Promise<TestImages> {
  images ??= (async () => ({
    web: await derivedImage(VARIANTS.web.repo, VARIANTS.web.config),
    webHealthcheck: await derivedImage(VARIANTS.webHealthcheck.repo, VARIANTS.webHealthcheck.config),
    webSlowHealthcheck: await derivedImage(VARIANTS.webSlowHealthcheck.repo, VARIANTS.webSlowHealthcheck.config),
    webReadyLater: await derivedImage(VARIANTS.webReadyLater.repo, VARIANTS.webReadyLater.config),
  }))();
  return images;
}
