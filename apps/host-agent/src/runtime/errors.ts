import { catalogCodes, CodedError, defineErrorCatalog } from '@tether/common';

// The catalog of runtime error codes (part of the agent's catalog in
// src/errors.ts). Codes travel to the panel in `deploy.result` and land in
// deployment rows, so they are part of the contract: never rename or reuse one.

export const RUNTIME_ERROR_CATALOG = defineErrorCatalog({
  IMAGE_NOT_FOUND: 'the image is not on the host and no pull was possible, or it vanished before create',
  IMAGE_PULL_FAILED: 'the image was missing and pulling it failed or did not finish in time',
  REGISTRY_AUTH_FAILED: "the image's registry refused the pull: no credentials, or the team's credentials were wrong (also for a private image already on the node)",
  REGISTRY_UNREACHABLE: "the image's registry did not answer (refused, unknown host, TLS failure, or no answer within TETHER_IMAGE_PULL_TIMEOUT_MS)",
  CONTAINER_EXITED: "the container's process ended (during a rollout, or past the restart budget)",
  HEALTHCHECK_FAILED: "the image's HEALTHCHECK reported unhealthy, or the service's HTTP health check did not pass (the reason carries the last probe)",
  START_TIMEOUT: 'not running (and healthy) within the start timeout',
  START_FAILED: 'Docker refused to start the container (bad entrypoint, missing binary, …)',
  RUNTIME_UNAVAILABLE: 'the Docker daemon does not answer (socket missing, refused, timed out) or TETHER_RUNTIME=none',
  CONTAINER_NOT_FOUND: 'the container is gone',
  NETWORK_NOT_FOUND: "Tether's Docker network is gone",
  // Prefixed: the panel's CONFLICT is an HTTP 409 of the API, a different thing.
  DOCKER_CONFLICT: 'Docker answered 409: a container name is taken, or the object is busy (removal in progress)',
  SUPERSEDED: 'a newer deployment of the same service replaced this one on this node',
  DOCKER_ERROR: "any other answer from the daemon; the message is the daemon's",
  OOM_KILLED: 'the kernel killed the container for exceeding its memory limit (resources.memoryMiB)',
});

export const RUNTIME_ERROR_CODES = catalogCodes(RUNTIME_ERROR_CATALOG);

export type RuntimeErrorCode = keyof typeof RUNTIME_ERROR_CATALOG;

/** What a failed call was about, so a 404 can say which object was missing. */
export type RuntimeSubject = 'container' | 'image' | 'network' | 'volume' | 'daemon';

export class RuntimeError extends CodedError<RuntimeErrorCode> {
  /** The daemon's own words, when it answered. */
  readonly daemonMessage: string | null;
  readonly statusCode: number | null;
  constructor(code: RuntimeErrorCode, message: string, options: { daemonMessage?: string | null; statusCode?: number | null; cause?: unknown } = {}) {
    super(code, message, { cause: options.cause });
    this.daemonMessage = options.daemonMessage ?? null;
    this.statusCode = options.statusCode ?? null;
  }
}

/**
 * Failures that belong to the deployment itself: trying it again without a
 * change would fail the same way, so the agent does not retry it.
 */
const DEPLOYMENT_FAULTS: ReadonlySet<RuntimeErrorCode> = new Set([
  RUNTIME_ERROR_CODES.IMAGE_NOT_FOUND,
  RUNTIME_ERROR_CODES.IMAGE_PULL_FAILED,
  RUNTIME_ERROR_CODES.REGISTRY_AUTH_FAILED,
  RUNTIME_ERROR_CODES.REGISTRY_UNREACHABLE,
  RUNTIME_ERROR_CODES.CONTAINER_EXITED,
  RUNTIME_ERROR_CODES.HEALTHCHECK_FAILED,
  RUNTIME_ERROR_CODES.START_TIMEOUT,
  RUNTIME_ERROR_CODES.START_FAILED,
  RUNTIME_ERROR_CODES.OOM_KILLED,
]);

export function isDeploymentFault(code: string): boolean {
  return DEPLOYMENT_FAULTS.has(code as RuntimeErrorCode);
}

interface DockerishError {
  message?: string;
  code?: string;
  name?: string;
  statusCode?: number;
  json?: unknown;
}

function daemonText(err: DockerishError): string | null {
  const json = err.json;
  if (json && typeof json === 'object' && typeof (json as { message?: unknown }).message === 'string') {
    return (json as { message: string }).message.trim();
  }
  if (typeof json === 'string' && json.trim()) return json.trim();
  if (Buffer.isBuffer(json) && json.length > 0) return json.toString('utf8').trim();
  return null;
}

/**
 * Turns whatever dockerode threw into a RuntimeError with a stable code and
 * the daemon's message. `operation` names the call ("start container abc"),
 * `timeoutMs` is the bound it ran under, for a readable timeout message.
 */
export function toRuntimeError(error: unknown, operation: string, subject: RuntimeSubject, timeoutMs?: number): RuntimeError {
  if (error instanceof RuntimeError) return error;
  const err = (error ?? {}) as DockerishError;
  const cause = error;
  if (err.name === 'TimeoutError' || err.name === 'AbortError' || err.code === 'ABORT_ERR') {
    const bound = timeoutMs === undefined ? '' : ` within ${timeoutMs} ms`;
    return new RuntimeError(RUNTIME_ERROR_CODES.RUNTIME_UNAVAILABLE, `docker did not answer ${operation}${bound}`, { cause });
  }
  const status = typeof err.statusCode === 'number' ? err.statusCode : null;
  // A system error code without an HTTP status means the transport failed
  // (socket missing, refused, reset): the daemon is not there, rather than saying "no".
  if (status === null && typeof err.code === 'string') {
    return new RuntimeError(RUNTIME_ERROR_CODES.RUNTIME_UNAVAILABLE, `docker is unreachable (${operation}): ${err.message ?? err.code}`, { cause });
  }
  // dockerode prefixes the daemon's words with "(HTTP code 500) server error - " when it read them from a stream.
  const said = daemonText(err) ?? (err.message ?? String(error)).replace(/^\(HTTP code \d+\)[^-]*- /, '').trim();
  const opts = { daemonMessage: said, statusCode: status, cause };
  if (status === 404) {
    const code = subject === 'image' ? RUNTIME_ERROR_CODES.IMAGE_NOT_FOUND
      : subject === 'network' ? RUNTIME_ERROR_CODES.NETWORK_NOT_FOUND
        : subject === 'container' ? RUNTIME_ERROR_CODES.CONTAINER_NOT_FOUND
          : RUNTIME_ERROR_CODES.DOCKER_ERROR;
    return new RuntimeError(code, `${operation}: ${said}`, opts);
  }
  if (status === 409) return new RuntimeError(RUNTIME_ERROR_CODES.DOCKER_CONFLICT, `${operation}: ${said}`, opts);
  return new RuntimeError(RUNTIME_ERROR_CODES.DOCKER_ERROR, `${operation}: ${said}`, opts);
}
