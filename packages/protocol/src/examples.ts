import { DEFAULT_TIMING, PROTOCOL_VERSION } from './constants.js';
import type { ContainerState, Message, MessageType, RoutingStatus, Workload } from './messages.js';
import { routingHash, serviceUpstream } from './routing.js';

// One valid example of every message: used by the tests, and the source of the
// example frames in docs/protocol.md (a test checks the two agree).

const container: ContainerState = {
  containerId: '3f2a9c1d0b7e',
  serviceId: 'svc_01',
  deploymentId: 'dep_07',
  name: 'tether-web-dep_07-0',
  state: 'running',
  exitCode: null,
  health: 'healthy',
  restartCount: 0,
  since: '2026-11-29T10:00:00.000Z',
};

const routing: RoutingStatus = {
  appliedHash: 'a3c9e0f4',
  reloadsTotal: 3,
  reloadsToday: 1,
  lastReloadAt: '2026-11-29T09:55:12.000Z',
  lastReloadReason: 'added shop.example.com',
};

const workload: Workload = {
  serviceId: 'svc_01',
  serviceName: 'web',
  deploymentId: 'dep_07',
  image: 'registry.example.com/web:1.4.2',
  env: { NODE_ENV: 'production' },
  port: 8080,
  replicas: 1,
};

const routes = [{ domain: 'shop.example.com', pathPrefix: null, serviceId: 'svc_01', upstream: serviceUpstream('svc_01', 8080) }];

export const EXAMPLE_MESSAGES: { [K in MessageType]: Extract<Message, { type: K }> } = {
  hello: {
    type: 'hello',
    id: 'a-1',
    node: 'edge-1',
    agentVersion: '0.1.0',
    protocolVersion: PROTOCOL_VERSION,
    containers: [container],
    runtime: { available: true, error: null },
    routing,
    capabilities: ['logs'],
  },
  welcome: {
    type: 'welcome',
    id: 'p-1',
    ref: 'a-1',
    sessionId: 'ses_4kq9',
    nodeId: 'node_01',
    timing: { ...DEFAULT_TIMING },
    capabilities: ['logs'],
  },
  heartbeat: {
    type: 'heartbeat',
    id: 'a-2',
    seq: 17,
    containers: [container],
    runtime: { available: true, error: null },
    routing,
  },
  ping: { type: 'ping', id: 'p-2' },
  pong: { type: 'pong', id: 'a-3', ref: 'p-2' },
  deploy: { type: 'deploy', id: 'p-3', workload },
  workloads: { type: 'workloads', id: 'p-4', workloads: [workload] },
  ack: { type: 'ack', id: 'a-4', ref: 'p-3' },
  'deploy.result': {
    type: 'deploy.result',
    id: 'a-5',
    deploymentId: 'dep_07',
    status: 'failed',
    reason: 'container exited with code 1 within 2 s of start',
    code: 'CONTAINER_EXITED',
  },
  'routing.map': { type: 'routing.map', id: 'p-5', version: 42, hash: routingHash(routes), routes },
  'routing.applied': {
    type: 'routing.applied',
    id: 'a-6',
    ref: 'p-5',
    hash: routingHash(routes),
    changed: false,
    reloaded: false,
    error: null,
    routing,
  },
  'logs.open': { type: 'logs.open', id: 'p-7', streamId: 'log_1', serviceId: 'svc_01', tail: 100, since: null, follow: true, credit: 262_144 },
  'logs.credit': { type: 'logs.credit', id: 'p-8', streamId: 'log_1', bytes: 65_536 },
  'logs.close': { type: 'logs.close', id: 'p-9', streamId: 'log_1' },
  'logs.chunk': {
    type: 'logs.chunk',
    id: 'a-7',
    streamId: 'log_1',
    lines: [
      { containerId: '3f2a9c1d0b7e', replica: 'tether-web-dep_07-0', stream: 'stdout', time: '2026-11-29T10:00:01.123456789Z', text: 'GET / 200 3ms' },
      { containerId: '3f2a9c1d0b7e', replica: 'tether-web-dep_07-0', stream: 'stderr', time: '2026-11-29T10:00:01.200000000Z', text: 'warn: cache miss \\u001b[0m' },
    ],
  },
  'logs.end': { type: 'logs.end', id: 'a-8', streamId: 'log_1', code: 'END_OF_LOGS', reason: 'all 100 lines sent' },
  error: { type: 'error', id: 'p-6', ref: 'a-9', code: 'UNKNOWN_TYPE', message: 'unknown message type "hullo"' },
};
