import { createHash } from 'node:crypto';
import { TEST_IMAGE, dockerApi } from '@tether/testkit';

// Local images for the runtime tests, made from the test kit's busybox image
// with `docker commit` (no registry). One program, steered by env vars the
// workload carries:
//   MESSAGE     what GET / answers (default "hello")
//   EXIT_CODE   exit at once with this code (with EXIT_AFTER: after that many seconds, serving meanwhile)
//   UNHEALTHY   make the image's HEALTHCHECK (where it has one) fail
//   READY_AFTER the HEALTHCHECK passes only after that many seconds
const SCRIPT = [
  'mkdir -p /tmp/www',
  'echo "${MESSAGE:-hello}" > /tmp/www/index.html',
  '[ -n "$UNHEALTHY" ] && touch /tmp/unhealthy',
  '{ sleep "${READY_AFTER:-0}"; touch /tmp/ready; } &',
  'if [ -n "$EXIT_CODE" ] && [ -z "$EXIT_AFTER" ]; then echo "failing on purpose" >&2; exit "$EXIT_CODE"; fi',
  'httpd -f -p 8080 -h /tmp/www &',
  // PID 1 ignores SIGTERM without a handler: trap it so `docker stop` is quick, like a well-behaved app.
  "trap 'kill $!; exit 0' TERM",
  'if [ -n "$EXIT_AFTER" ]; then sleep "$EXIT_AFTER"; exit "${EXIT_CODE:-1}"; fi',
  'wait',
].join('\n');

const HEALTHY_PROBE = { Test: ['CMD-SHELL', 'test ! -e /tmp/unhealthy || { echo probe says unhealthy; exit 1; }'], Interval: 200e6, Timeout: 2e9, Retries: 2 };
/** Healthy only once READY_AFTER has passed; failures before that fall in the start period and do not count. */
const READY_PROBE = { Test: ['CMD-SHELL', 'test -e /tmp/ready'], Interval: 200e6, Timeout: 2e9, Retries: 2, StartPeriod: 30e9 };
/** A probe whose first run is a minute away: health stays "starting". */
const SLOW_PROBE = { Test: ['CMD-SHELL', 'true'], Interval: 60e9, Timeout: 2e9, Retries: 1 };

interface Variant {
  repo: string;
  config: Record<string, unknown>;
}

const VARIANTS = {
  web: { repo: 'tether-test/web', config: { Cmd: ['sh', '-c', SCRIPT] } },
  webHealthcheck: { repo: 'tether-test/web-hc', config: { Cmd: ['sh', '-c', SCRIPT], Healthcheck: HEALTHY_PROBE } },
  webSlowHealthcheck: { repo: 'tether-test/web-slow-hc', config: { Cmd: ['sh', '-c', SCRIPT], Healthcheck: SLOW_PROBE } },
  webReadyLater: { repo: 'tether-test/web-ready-later', config: { Cmd: ['sh', '-c', SCRIPT], Healthcheck: READY_PROBE } },
} satisfies Record<string, Variant>;

export type TestImages = { [K in keyof typeof VARIANTS]: string };

/** The tag is a hash of what the image does, so a changed script makes a new image instead of reusing a stale one. */
const tagOf = (v: Variant) => `${v.repo}:${createHash('sha256').update(JSON.stringify(v.config)).digest('hex').slice(0, 10)}`;

async function imageExists(name: string): Promise<boolean> {
  return (await dockerApi('GET', `/images/${encodeURIComponent(name)}/json`)).status === 200;
}

async function build(v: Variant): Promise<string> {
  const tag = tagOf(v);
  if (await imageExists(tag)) return tag;
  const created = await dockerApi('POST', '/containers/create', JSON.stringify({ Image: TEST_IMAGE, Cmd: ['true'], Labels: { 'tether.test': 'image-build' } }));
  if (created.status !== 201) throw new Error(`creating the base container failed: ${created.status} ${created.body}`);
  const { Id } = JSON.parse(created.body) as { Id: string };
  try {
    const [repo, version] = tag.split(':') as [string, string];
    const query = new URLSearchParams({ container: Id, repo, tag: version });
    const res = await dockerApi('POST', `/commit?${query.toString()}`, JSON.stringify(v.config));
    if (res.status !== 201) throw new Error(`docker commit of ${tag} failed: ${res.status} ${res.body}`);
  } finally {
    await dockerApi('DELETE', `/containers/${Id}?force=1`);
  }
  return tag;
}

let images: Promise<TestImages> | undefined;

/** Builds (once per machine, safe in parallel) and names the runtime test images. */
export function ensureRuntimeImages(): Promise<TestImages> {
  images ??= (async () => ({
    web: await build(VARIANTS.web),
    webHealthcheck: await build(VARIANTS.webHealthcheck),
    webSlowHealthcheck: await build(VARIANTS.webSlowHealthcheck),
    webReadyLater: await build(VARIANTS.webReadyLater),
  }))();
  return images;
}
