import { CAPABILITIES, DEFAULT_TIMING, PROTOCOL_VERSION } from './constants.js';
import type { ContainerState, Message, MessageType, Release, RoutingStatus, Workload } from './messages.js';
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

/** A shared certificate (capability certificates.share); PEM bodies shortened: the schema checks the armour only. */
const sharedCertificate = {
  domain: 'shop.example.com',
  certificatePem: '-----BEGIN CERTIFICATE-----\nMIIB…\n-----END CERTIFICATE-----\n',
  keyPem: '-----BEGIN EC PRIVATE KEY-----\nMHcC…\n-----END EC PRIVATE KEY-----\n',
  notAfter: '2027-02-27T10:00:00.000Z',
};

const routing: RoutingStatus = {
  appliedHash: 'a3c9e0f4',
  reloadsTotal: 3,
  reloadsToday: 1,
  lastReloadAt: '2026-11-29T09:55:12.000Z',
  lastReloadReason: 'added shop.example.com',
};

/** What an agent with a canary reports (the optional parts of RoutingStatus). */
const routingWithCanary: RoutingStatus = {
  ...routing,
  reloadKinds: { initial: 1, repairEmpty: 1, change: 1, repairDrift: 0 },
  canary: {
    connected: true,
    dropsToday: 1,
    dropsTotal: 2,
    causesTotal: { reload: 1, proxyRestarted: 1, proxyUnreachable: 0, unexplained: 0 },
    causesToday: { reload: 1, proxyRestarted: 0, proxyUnreachable: 0, unexplained: 0 },
    lastDropAt: '2026-11-29T09:55:12.004Z',
    lastDropCause: 'reload: added shop.example.com',
    httpFailuresTotal: 0,
  },
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

const { replicas: _replicas, ...rest } = workload;
const release: Release = rest;

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
    capabilities: [CAPABILITIES.PROXY_EVENTS, CAPABILITIES.LOGS],
  },
  welcome: {
    type: 'welcome',
    id: 'p-1',
    ref: 'a-1',
    sessionId: 'ses_4kq9',
    nodeId: 'node_01',
    timing: { ...DEFAULT_TIMING },
    capabilities: [CAPABILITIES.PROXY_EVENTS, CAPABILITIES.LOGS],
  },
  heartbeat: {
    type: 'heartbeat',
    id: 'a-2',
    seq: 17,
    containers: [container],
    runtime: { available: true, error: null },
    routing: routingWithCanary,
  },
  ping: { type: 'ping', id: 'p-2' },
  pong: { type: 'pong', id: 'a-3', ref: 'p-2' },
  deploy: { type: 'deploy', id: 'p-3', workload },
  'volumes.remove': { type: 'volumes.remove', id: 'p-9', serviceId: 'svc_01' },
  'volumes.report': {
    type: 'volumes.report',
    id: 'a-9',
    volumes: [
      { dockerName: 'tether-svc_01-data', serviceId: 'svc_01', volume: 'data', createdAt: '2026-01-01T00:00:00Z', sizeBytes: 40960, measuredAt: '2026-01-01T00:05:00.000Z' },
    ],
  },
  workloads: { type: 'workloads', id: 'p-4', workloads: [workload] },
  'certificates.report': { type: 'certificates.report', id: 'a-10', certificates: [sharedCertificate] },
  certificates: { type: 'certificates', id: 'p-11', certificates: [sharedCertificate] },
  // Mid-rollout: one replica of web already on release dep_08, one still on dep_07.
  allocations: {
    type: 'allocations',
    id: 'p-10',
    releases: [release, { ...release, deploymentId: 'dep_08', image: 'registry.example.com/web:1.4.3' }],
    allocations: [
      { allocationId: 'alc_01', serviceId: 'svc_01', deploymentId: 'dep_08' },
      { allocationId: 'alc_02', serviceId: 'svc_01', deploymentId: 'dep_07' },
    ],
  },
  'allocations.status': {
    type: 'allocations.status',
    id: 'a-11',
    ref: 'p-10',
    allocations: [
      {
        allocationId: 'alc_01',
        serviceId: 'svc_01',
        deploymentId: 'dep_08',
        runningDeploymentId: 'dep_08',
        state: 'running',
        containerId: '9b1e44c2d7a0',
        health: 'healthy',
        code: null,
        reason: null,
        imageRef: 'registry.example.com/web@sha256:4f1c0d3e5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d',
        since: '2026-11-29T10:02:00.000Z',
      },
      {
        allocationId: 'alc_02',
        serviceId: 'svc_01',
        deploymentId: 'dep_07',
        runningDeploymentId: 'dep_07',
        state: 'running',
        containerId: '3f2a9c1d0b7e',
        health: 'healthy',
        code: null,
        reason: null,
        imageRef: 'registry.example.com/web@sha256:0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b',
        since: '2026-11-29T10:00:00.000Z',
      },
    ],
  },
  ack: { type: 'ack', id: 'a-4', ref: 'p-3' },
  'deploy.result': {
    type: 'deploy.result',
    id: 'a-5',
    deploymentId: 'dep_07',
    status: 'failed',
    reason: 'container exited with code 1 within 2 s of start',
    code: 'CONTAINER_EXITED',
  },
  'deploy.drained': {
    type: 'deploy.drained',
    id: 'a-10',
    deploymentId: 'dep_08',
    connectionsOpenAtSwitch: 3,
    connectionsCut: 1,
    drainEndedAt: '2026-01-01T00:00:30.000Z',
  },
  'allocations.drained': {
    type: 'allocations.drained',
    id: 'a-12',
    deploymentId: 'dep_08',
    allocationIds: ['alc_01'],
    connectionsOpenAtSwitch: 2,
    connectionsCut: 0,
    drainEndedAt: '2026-01-01T00:00:12.000Z',
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
  'proxy.events': {
    type: 'proxy.events',
    id: 'a-7',
    events: [
      {
        event: 'reload',
        epoch: 1764409000000,
        seq: 4,
        at: '2026-11-29T09:55:12.000Z',
        kind: 'change',
        hashBefore: 'f01d2c7a',
        hashAfter: 'a3c9e0f4',
        reason: 'added shop.example.com',
      },
      {
        event: 'canary.drop',
        epoch: 1764409000000,
        seq: 5,
        at: '2026-11-29T09:55:12.004Z',
        cause: 'reload',
        reloadReason: 'added shop.example.com',
        closeCode: 1001,
        reconnectMs: 212,
      },
    ],
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
