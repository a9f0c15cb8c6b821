import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { DeploymentDispatcher, DispatchOutcome, DispatchRequest } from '../../src/dispatch/session-dispatcher.js';
import { AppError } from '../../src/errors.js';
import { code, errorOf, sharedPostgres, startRestPanel, type RestPanel } from '../helpers/rest-harness.js';

// Deployments: the row is persisted (pending) before the dispatcher sees it,
// the answer follows the dispatcher's outcome, and whatever the dispatcher
// does, the row ends in a state that says what happened.

describe('deployments API', () => {
  let p: RestPanel;
  let team: { id: string; token: string };
  let service: { id: string; nodeId: string; name: string };
  const dispatched: Array<{ request: DispatchRequest; rowAtDispatch: unknown }> = [];
  let behaviour: (request: DispatchRequest) => Promise<DispatchOutcome>;
  const defaultBehaviour = async (): Promise<DispatchOutcome> => ({ httpStatus: 201 });

  const dispatcher: DeploymentDispatcher = {
    async dispatch(request) {
      const rowAtDispatch = await p.prisma.deployment.findUnique({ where: { id: request.deploymentId } });
      dispatched.push({ request, rowAtDispatch });
      return behaviour(request);
    },
  };

  beforeAll(async () => {
    p = await startRestPanel({ pg: await sharedPostgres(), dispatcher });
    team = await p.team('deploy-team');
    await p.node('worker-1');
    service = (
      await p.call('POST', '/v1/services', {
        token: team.token,
        body: { name: 'web', image: 'nginx:1.27', env: { MODE: 'prod' }, internalPort: 8080, replicas: 2 },
      })
    ).body;
  });

  beforeEach(() => {
    dispatched.length = 0;
    behaviour = defaultBehaviour;
  });

  afterAll(async () => {
    await p?.close();
  });

  const deploy = (serviceId = service.id, token: string | null = team.token) => p.call('POST', `/v1/services/${serviceId}/deployments`, { token });

  describe('POST /v1/services/:id/deployments', () => {
    it('persists a pending deployment with a snapshot of the spec, then dispatches the protocol workload', async () => {
      const res = await deploy();
      expect(res.status).toBe(201);
      expect(res.body).toEqual({
        id: expect.any(String),
        serviceId: service.id,
        nodeId: service.nodeId,
        spec: { name: 'web', image: 'nginx:1.27', env: { MODE: 'prod' }, internalPort: 8080, replicas: 2, command: null, args: null, resources: null, volumes: [], healthCheck: null, drainSeconds: 30, failover: { fence: false }, rollout: { maxSurge: null, maxUnavailable: null, progressDeadlineSeconds: null } },
        status: 'pending',
        reason: null,
        sessionId: null,
        createdAt: expect.any(String),
        dispatchedAt: null,
        ackedAt: null,
        finishedAt: null,
        runningAt: null,
        rollbackOf: null,
        imageRef: null,
        reportsDrain: false,
        connectionsOpenAtSwitch: null,
        connectionsCut: null,
        drainEndedAt: null,
      });
      expect(dispatched).toHaveLength(1);
      const [{ request, rowAtDispatch }] = dispatched as [(typeof dispatched)[number]];
      // The row was committed before dispatch was called.
      expect(rowAtDispatch).toMatchObject({ id: res.body.id, status: 'pending' });
      expect(request).toEqual({
        deploymentId: res.body.id,
        nodeId: service.nodeId,
        nodeName: 'worker-1',
        workload: { serviceId: service.id, serviceName: 'web', deploymentId: res.body.id, image: 'nginx:1.27', env: { MODE: 'prod' }, port: 8080, replicas: 2, drainSeconds: 30 },
      });
    });

    it('keeps the snapshot when the service changes later', async () => {
      const first = await deploy();
      await p.call('PATCH', `/v1/services/${service.id}`, { token: team.token, body: { image: 'nginx:1.28' } });
      const second = await deploy();
      expect((await p.call('GET', `/v1/deployments/${first.body.id}`, { token: team.token })).body.spec.image).toBe('nginx:1.27');
      expect(second.body.spec.image).toBe('nginx:1.28');
      await p.call('PATCH', `/v1/services/${service.id}`, { token: team.token, body: { image: 'nginx:1.27' } });
    });

    it("answers with the dispatcher's status and the deployment as it is after dispatch", async () => {
      behaviour = async (request) => {
        await p.prisma.deployment.update({ where: { id: request.deploymentId }, data: { status: 'delivered', sessionId: 's-1', dispatchedAt: new Date(), ackedAt: new Date() } });
        return { httpStatus: 202 };
      };
      const res = await deploy();
      expect(res.status).toBe(202);
      expect(res.body).toMatchObject({ status: 'delivered', sessionId: 's-1', ackedAt: expect.any(String) });
    });

    it('lets a dispatcher AppError through as the answer (the dispatcher ended the row itself)', async () => {
      behaviour = async (request) => {
        await p.prisma.deployment.update({ where: { id: request.deploymentId }, data: { status: 'unreachable', reason: 'no live session', finishedAt: new Date() } });
        throw new AppError('NODE_UNREACHABLE', 'node worker-1 is unreachable until it rejoins');
      };
      const res = await deploy();
      expect(errorOf(res)).toEqual({ status: 503, code: 'NODE_UNREACHABLE', message: 'node worker-1 is unreachable until it rejoins' });
      const row = await p.prisma.deployment.findUniqueOrThrow({ where: { id: dispatched[0]!.request.deploymentId } });
      expect(row).toMatchObject({ status: 'unreachable', reason: 'no live session' });
    });

    it('ends the row as failed when a dispatcher breaks with anything else (500), so nothing stays pending', async () => {
      behaviour = async () => {
        throw new Error('socket exploded');
      };
      const res = await deploy();
      expect(errorOf(res)).toMatchObject({ status: 500, code: 'INTERNAL' });
      const row = await p.prisma.deployment.findUniqueOrThrow({ where: { id: dispatched[0]!.request.deploymentId } });
      expect(row).toMatchObject({ status: 'failed', reason: 'dispatch failed: socket exploded', finishedAt: expect.any(Date) });
    });

    it('refuses a service on a decommissioned node with 409 NODE_DECOMMISSIONED and creates no row', async () => {
      const node = await p.node('doomed');
      const doomed = (await p.call('POST', '/v1/services', { token: team.token, body: { name: 'doomed', image: 'nginx', node: 'doomed' } })).body;
      await p.call('DELETE', `/v1/nodes/${node.id}`);
      expect(await code(deploy(doomed.id))).toMatchObject({ status: 409, code: 'NODE_DECOMMISSIONED' });
      expect(await p.prisma.deployment.count({ where: { serviceId: doomed.id } })).toBe(0);
      expect(dispatched).toHaveLength(0);
    });

    it('404 for an unknown service, 400 for a malformed id, 401 without a token', async () => {
      expect(await code(deploy('nope'))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
      expect(await code(deploy('no$such'))).toMatchObject({ status: 400, code: 'VALIDATION_FAILED' });
      expect(await code(deploy(service.id, null))).toMatchObject({ status: 401, code: 'UNAUTHORIZED' });
      expect(dispatched).toHaveLength(0);
    });
  });

  describe('reading deployments', () => {
    it('GET /v1/deployments/:id; 404 unknown; 401 without a token', async () => {
      const made = await deploy();
      expect((await p.call('GET', `/v1/deployments/${made.body.id}`, { token: team.token })).body).toEqual(made.body);
      expect((await p.call('GET', `/v1/deployments/${made.body.id}`)).status).toBe(200);
      expect(await code(p.call('GET', '/v1/deployments/nope', { token: team.token }))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
      expect(await code(p.call('GET', `/v1/deployments/${made.body.id}`, { token: null }))).toMatchObject({ status: 401 });
    });

    it('GET /v1/services/:id/deployments lists newest first, ?limit= bounds it', async () => {
      const all = await p.call('GET', `/v1/services/${service.id}/deployments`, { token: team.token });
      expect(all.status).toBe(200);
      expect(all.body.length).toBeGreaterThanOrEqual(5);
      const times = all.body.map((d: { createdAt: string }) => d.createdAt);
      expect([...times].sort().reverse()).toEqual(times);
      const two = await p.call('GET', `/v1/services/${service.id}/deployments?limit=2`, { token: team.token });
      expect(two.body).toEqual(all.body.slice(0, 2));
      for (const bad of ['0', '201', 'abc', '1.5', '-1']) {
        expect(await code(p.call('GET', `/v1/services/${service.id}/deployments?limit=${bad}`, { token: team.token })), bad).toMatchObject({
          status: 400,
          code: 'VALIDATION_FAILED',
        });
      }
      expect(await code(p.call('GET', `/v1/services/${service.id}/deployments?status=x`, { token: team.token }))).toMatchObject({ status: 400 });
      expect(await code(p.call('GET', '/v1/services/nope/deployments', { token: team.token }))).toMatchObject({ status: 404, code: 'NOT_FOUND' });
      expect(await code(p.call('GET', `/v1/services/${service.id}/deployments`, { token: null }))).toMatchObject({ status: 401 });
    });
  });
});
