import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DeploymentDispatcher } from '../../src/dispatch/session-dispatcher.js';
import { errorOf, sharedPostgres, startRestPanel, type RestPanel } from '../helpers/rest-harness.js';

// Deploys you can wait on: POST …/deployments?wait= and the SSE stream of a
// deployment's states. The dispatcher "delivers" (202) and the test plays the
// agent by writing the row's final state, as the session store does.

const WATCH_MS = 50;

describe('waiting on deployments', () => {
  let p: RestPanel;
  let team: { id: string; token: string };
  let other: { id: string; token: string };
  let serviceId: string;
  const delivering: DeploymentDispatcher = {
    async dispatch(request) {
      await p.prisma.deployment.update({ where: { id: request.deploymentId }, data: { status: 'delivered', ackedAt: new Date(), dispatchedAt: new Date() } });
      return { httpStatus: 202 };
    },
  };
  /** Ends the service's newest deployment as the agent would, after `ms`. */
  const finishLater = (status: 'running' | 'failed', reason: string, ms: number) =>
    setTimeout(() => {
      // Prisma's promises are lazy: nothing runs until then() is called.
      void p.prisma.deployment.updateMany({ where: { serviceId, status: 'delivered' }, data: { status, reason, finishedAt: new Date() } }).then(() => undefined);
    }, ms);

  beforeAll(async () => {
    p = await startRestPanel({ pg: await sharedPostgres(), dispatcher: delivering, env: { TETHER_DEPLOYMENT_WATCH_MS: String(WATCH_MS) } });
    team = await p.team('wait-team');
    other = await p.team('wait-other');
    await p.node('wait-node');
    serviceId = (await p.call('POST', '/v1/services', { token: team.token, body: { name: 'web', image: 'nginx:1.27', internalPort: 8080 } })).body.id;
  });
  afterAll(async () => {
    await p?.close();
  });

  it('?wait= answers 200 with "final": true as soon as the deployment is final', async () => {
    finishLater('running', 'all replicas running', 300);
    const started = performance.now();
    const res = await p.call('POST', `/v1/services/${serviceId}/deployments?wait=5`, { token: team.token });
    const ms = performance.now() - started;
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'running', reason: 'all replicas running', final: true });
    expect(ms).toBeGreaterThanOrEqual(300);
    expect(ms).toBeLessThan(300 + WATCH_MS + 1_000);
  });

  it('?wait= that ends first answers 202 with the current state and "final": false', async () => {
    const started = performance.now();
    const res = await p.call('POST', `/v1/services/${serviceId}/deployments?wait=1`, { token: team.token });
    const ms = performance.now() - started;
    expect(res.status).toBe(202);
    expect(res.body).toMatchObject({ status: 'delivered', final: false });
    expect(ms).toBeGreaterThanOrEqual(1_000);
    expect(ms).toBeLessThan(2_000);
    await p.prisma.deployment.update({ where: { id: res.body.id }, data: { status: 'failed', reason: 'cleanup', finishedAt: new Date() } });
  });

  it('?wait= is validated (1-600 seconds); without it the answer is unchanged and has no "final"', async () => {
    expect(errorOf(await p.call('POST', `/v1/services/${serviceId}/deployments?wait=0`, { token: team.token }))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
    expect(errorOf(await p.call('POST', `/v1/services/${serviceId}/deployments?wait=601`, { token: team.token }))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
    expect(errorOf(await p.call('POST', `/v1/services/${serviceId}/deployments?wait=abc`, { token: team.token }))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
    const plain = await p.call('POST', `/v1/services/${serviceId}/deployments`, { token: team.token });
    expect(plain.status).toBe(202);
    expect(plain.body).not.toHaveProperty('final');
    await p.prisma.deployment.update({ where: { id: plain.body.id }, data: { status: 'failed', reason: 'cleanup', finishedAt: new Date() } });
  });

  /** Reads an SSE stream to its end (bounded) and returns its events. */
  async function readEvents(path: string, token: string, timeoutMs = 5_000) {
    const res = await fetch(`${p.app.listeningOrigin}${path}`, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(timeoutMs) });
    const text = await res.text();
    const events = text
      .split('\n\n')
      .filter((block) => block.startsWith('event:'))
      .map((block) => {
        const fields = Object.fromEntries(block.split('\n').map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 2)]));
        return { event: fields.event, id: fields.id, data: JSON.parse(fields.data ?? 'null') };
      });
    return { status: res.status, type: res.headers.get('content-type'), events };
  }

  it('GET /v1/deployments/:id/events streams the states from now to final, then ends', async () => {
    const created = await p.call('POST', `/v1/services/${serviceId}/deployments`, { token: team.token });
    expect(created.status).toBe(202);
    finishLater('failed', 'IMAGE_PULL_FAILED: no such image', 400);
    const started = performance.now();
    const { status, type, events } = await readEvents(`/v1/deployments/${created.body.id}/events`, team.token);
    const ms = performance.now() - started;
    expect(status).toBe(200);
    expect(type).toMatch(/^text\/event-stream/);
    expect(events.map((e) => [e.event, e.id, e.data.status, e.data.final])).toEqual([
      ['deployment', '1', 'delivered', false],
      ['deployment', '2', 'failed', true],
    ]);
    expect(events[1]!.data).toMatchObject({ id: created.body.id, reason: 'IMAGE_PULL_FAILED: no such image' });
    expect(ms).toBeGreaterThanOrEqual(400);
    expect(ms).toBeLessThan(400 + WATCH_MS + 1_000);
  });

  it('a final deployment streams one event and ends; another team gets 404 in the error shape', async () => {
    const done = (await p.call('GET', `/v1/services/${serviceId}/deployments?limit=1`, { token: team.token })).body[0];
    const { events } = await readEvents(`/v1/deployments/${done.id}/events`, team.token);
    expect(events).toEqual([{ event: 'deployment', id: '1', data: expect.objectContaining({ id: done.id, status: done.status, final: true }) }]);
    expect(errorOf(await p.call('GET', `/v1/deployments/${done.id}/events`, { token: other.token }))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
    expect(errorOf(await p.call('POST', `/v1/services/${serviceId}/deployments?wait=1`, { token: other.token }))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
  });

  it('a deployment deleted with its service ends the stream with `event: gone`', async () => {
    const svc = (await p.call('POST', '/v1/services', { token: team.token, body: { name: 'doomed', image: 'nginx:1.27' } })).body.id;
    const created = await p.call('POST', `/v1/services/${svc}/deployments`, { token: team.token });
    setTimeout(() => void p.call('DELETE', `/v1/services/${svc}`, { token: team.token }), 200);
    const { events } = await readEvents(`/v1/deployments/${created.body.id}/events`, team.token);
    expect(events.map((e) => e.event)).toEqual(['deployment', 'gone']);
  });
});
