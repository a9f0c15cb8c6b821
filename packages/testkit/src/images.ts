import { createHash } from 'node:crypto';
import { TEST_IMAGE, dockerApi, imageExists } from './docker.js';

/**
 * The program of the web test images: one busybox shell script, steered by
 * env vars the workload carries (a service spec has no command, so behaviour
 * has to come from the image and its environment):
 *   MESSAGE     what GET / on port 8080 answers (default "hello")
 *   EXIT_CODE   exit at once with this code (with EXIT_AFTER: after that many seconds, serving meanwhile)
 *   UNHEALTHY   make the image's HEALTHCHECK (where it has one) fail
 *   READY_AFTER the HEALTHCHECK passes only after that many seconds
 */
export const WEB_SCRIPT = [
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

/** Image config of the plain web image (no health check). */
export const WEB_IMAGE_CONFIG = { Cmd: ['sh', '-c', WEB_SCRIPT] };

/** A HEALTHCHECK that passes unless the container was started with UNHEALTHY set (then it fails with "probe says unhealthy"). */
export const WEB_HEALTHCHECK = { Test: ['CMD-SHELL', 'test ! -e /tmp/unhealthy || { echo probe says unhealthy; exit 1; }'], Interval: 200e6, Timeout: 2e9, Retries: 2 };

/** The web image with WEB_HEALTHCHECK. */
export const WEB_HEALTHCHECK_IMAGE_CONFIG = { ...WEB_IMAGE_CONFIG, Healthcheck: WEB_HEALTHCHECK };

/**
 * A local image made from the test image with `docker commit` and `config`
 * (Cmd, Healthcheck, …): no registry needed. The tag is a hash of the config,
 * so a changed config makes a new image instead of reusing a stale one; safe
 * to call from parallel workers (both commit the same thing under one tag).
 */
export async function derivedImage(repo: string, config: Record<string, unknown>): Promise<string> {
  const version = createHash('sha256').update(JSON.stringify(config)).digest('hex').slice(0, 10);
  const tag = `${repo}:${version}`;
  if (await imageExists(tag)) return tag;
  const created = await dockerApi('POST', '/containers/create', JSON.stringify({ Image: TEST_IMAGE, Cmd: ['true'], Labels: { 'tether.test': 'image-build' } }));
  if (created.status !== 201) throw new Error(`creating the base container failed: ${created.status} ${created.body}`);
  const { Id } = JSON.parse(created.body) as { Id: string };
  try {
    const query = new URLSearchParams({ container: Id, repo, tag: version });
    const res = await dockerApi('POST', `/commit?${query.toString()}`, JSON.stringify(config));
    if (res.status !== 201) throw new Error(`docker commit of ${tag} failed: ${res.status} ${res.body}`);
  } finally {
    await dockerApi('DELETE', `/containers/${Id}?force=1`);
  }
  return tag;
}

/** The web image: serves $MESSAGE on port 8080 (see WEB_SCRIPT). Needs ensureDocker() first. */
export const ensureWebImage = () => derivedImage('tether-test/web', WEB_IMAGE_CONFIG);

/**
 * The program of the log test image, steered by env vars:
 *   PREFIX    stdout lines are "$PREFIX <n>" (default "line"), every 5th also "<…> to stderr" on stderr
 *   INTERVAL  seconds between lines (default 0.05)
 *   GARBAGE   first print one line of invalid UTF-8, NUL, ESC and CR
 *   BURST     instead: BURST lines of LINE_BYTES (default 1000) bytes every 0.1 s (BURST=500: about 5 MB/s)
 */
export const PRINTER_SCRIPT = [
  "trap 'exit 0' TERM",
  `if [ -n "$GARBAGE" ]; then printf 'bin:\\377\\376|nul:\\000|esc:\\033[31m|cr:\\r|end\\n'; fi`,
  'if [ -n "$BURST" ]; then',
  '  PAD=$(printf "%${LINE_BYTES:-1000}s" | tr " " x); i=0',
  '  while [ "$i" -lt "$BURST" ]; do echo "$i $PAD"; i=$((i+1)); done > /tmp/block',
  '  while true; do cat /tmp/block; sleep 0.1; done',
  'fi',
  'i=0',
  'while true; do',
  '  i=$((i+1)); echo "${PREFIX:-line} $i"',
  '  if [ $((i % 5)) -eq 0 ]; then echo "${PREFIX:-line} $i to stderr" >&2; fi',
  '  sleep "${INTERVAL:-0.05}"',
  'done',
].join('\n');

/** The log test image (see PRINTER_SCRIPT). Needs ensureDocker() first. */
export const ensurePrinterImage = () => derivedImage('tether-test/printer', { Cmd: ['sh', '-c', PRINTER_SCRIPT] });
