import { describe, expect, it } from 'vitest';
import { RuntimeError, isDeploymentFault, toRuntimeError } from '../../src/runtime/errors.js';

// What dockerode throws, as seen on Docker 20.10, mapped to the agent's codes.
const http = (statusCode: number, message: string) => Object.assign(new Error(`(HTTP code ${statusCode}) - ${message}`), { statusCode, json: { message } });
const sys = (code: string) => Object.assign(new Error(`connect ${code} /var/run/docker.sock`), { code });
const abort = () => Object.assign(new Error('The operation was aborted'), { name: 'AbortError', code: 'ABORT_ERR' });

describe('toRuntimeError()', () => {
  it.each([
    ['socket missing', sys('ENOENT'), 'daemon', 'RUNTIME_UNAVAILABLE', /docker is unreachable \(op\): connect ENOENT/],
    ['connection refused', sys('ECONNREFUSED'), 'daemon', 'RUNTIME_UNAVAILABLE', /unreachable/],
    ['timed out', abort(), 'daemon', 'RUNTIME_UNAVAILABLE', /^docker did not answer op within 250 ms$/],
    ['no such image', http(404, 'No such image: x:1'), 'image', 'IMAGE_NOT_FOUND', /^op: No such image: x:1$/],
    ['no such container', http(404, 'No such container: abc'), 'container', 'CONTAINER_NOT_FOUND', /No such container/],
    ['no such network', http(404, 'network n not found'), 'network', 'NETWORK_NOT_FOUND', /network n not found/],
    ['name in use', http(409, 'Conflict. The container name "/x" is already in use'), 'container', 'DOCKER_CONFLICT', /already in use/],
    ['anything else', http(500, 'driver failed programming external connectivity'), 'container', 'DOCKER_ERROR', /^op: driver failed/],
  ] as const)('%s → %s', (_name, input, subject, code, message) => {
    const err = toRuntimeError(input, 'op', subject, 250);
    expect(err).toBeInstanceOf(RuntimeError);
    expect(err.code).toBe(code);
    expect(err.message).toMatch(message);
  });

  it('keeps the daemon\'s own words and the status', () => {
    const err = toRuntimeError(http(500, 'OCI runtime create failed'), 'start container x', 'container');
    expect(err).toMatchObject({ daemonMessage: 'OCI runtime create failed', statusCode: 500 });
  });

  it('tells deployment faults (never retried) from transient ones', () => {
    expect(['IMAGE_PULL_FAILED', 'CONTAINER_EXITED', 'HEALTHCHECK_FAILED', 'START_TIMEOUT'].every(isDeploymentFault)).toBe(true);
    expect(['RUNTIME_UNAVAILABLE', 'DOCKER_ERROR', 'DOCKER_CONFLICT'].some(isDeploymentFault)).toBe(false);
  });
});
