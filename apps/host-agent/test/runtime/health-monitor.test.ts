import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type Docker from 'dockerode';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '@tether/common';
import { waitFor } from '@tether/testkit';
import { dockerEndpoints } from '../../src/proxy/docker-endpoints.js';
import { HealthMonitor } from '../../src/runtime/health-monitor.js';
import { probeHttp, sanitiseProbeBody } from '../../src/runtime/http-probe.js';

// The agent's HTTP health checks against a real local HTTP server (no Docker needed): the probe's evidence,
// the thresholds, the start period, and the static proxy's endpoints leaving a failing container out.

let answer = { status: 200, body: 'ok' as string | Buffer, delayMs: 0 };
let server: http.Server;
let port: number;
const probes: { at: number; status: number }[] = [];

beforeAll(async () => {
  server = http.createServer((_req, res) => {
    probes.push({ at: Date.now(), status: answer.status });
    setTimeout(() => {
      res.writeHead(answer.status, { 'content-type': 'text/plain' });
      res.end(answer.body);
    }, answer.delayMs);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const check = (over: Partial<{ intervalSeconds: number; healthyThreshold: number; unhealthyThreshold: number; startPeriodSeconds: number; timeoutSeconds: number }> = {}) => ({
  path: '/health',
  port,
  intervalSeconds: 1,
  timeoutSeconds: 1,
  healthyThreshold: 1,
  unhealthyThreshold: 2,
  startPeriodSeconds: 0,
  ...over,
});

describe('probeHttp', () => {
  it('reports status, latency and the first 200 bytes, printable ASCII only', async () => {
    answer = { status: 500, body: Buffer.concat([Buffer.from('bad\u0001\n<é>'), Buffer.alloc(300, 0x41)]), delayMs: 0 };
    const r = await probeHttp('127.0.0.1', port, '/health', 1000);
    expect(r).toMatchObject({ ok: false, status: 500, error: null });
    expect(r.body).toHaveLength(200);
    expect(r.body.startsWith('bad??<??>AAA')).toBe(true);
    expect(Date.parse(r.at)).toBeGreaterThan(Date.now() - 5_000);
    expect(sanitiseProbeBody(Buffer.from([0x7f, 0x20, 0x7e]))).toBe('? ~');
  });

  it('a refused connection and a timeout are failures with their error', async () => {
    const refused = await probeHttp('127.0.0.1', 1, '/', 1000);
    expect(refused).toMatchObject({ ok: false, status: null, body: '' });
    expect(refused.error).toMatch(/ECONNREFUSED/);
    answer = { status: 200, body: 'late', delayMs: 600 };
    const started = Date.now();
    const slow = await probeHttp('127.0.0.1', port, '/', 200);
    expect(Date.now() - started).toBeLessThan(500);
    expect(slow).toMatchObject({ ok: false, status: null, error: 'no complete answer within 200 ms' });
  });
});

describe('HealthMonitor', () => {
  let monitor: HealthMonitor | undefined;
  afterEach(() => monitor?.stop());

  it('starting → healthy after healthyThreshold passes; unhealthy after unhealthyThreshold failures, no sooner; healthy again', async () => {
    answer = { status: 200, body: 'ok', delayMs: 0 };
    monitor = new HealthMonitor({ logger: silentLogger });
    monitor.track('c1', { serviceId: 's', check: check({ healthyThreshold: 2 }), host: '127.0.0.1', startedAt: 'a' });
    expect(monitor.view('c1')?.verdict).toBe('starting');
    expect(monitor.notServing()).toEqual(new Set(['c1']));
    const t0 = Date.now();
    await waitFor(() => monitor!.view('c1')?.verdict === 'healthy', { timeoutMs: 3_000, intervalMs: 20, message: 'healthy' });
    // Two passes one interval apart.
    expect(Date.now() - t0).toBeGreaterThanOrEqual(900);
    expect(monitor.notServing()).toEqual(new Set());

    answer = { status: 503, body: 'down', delayMs: 0 };
    const t1 = Date.now();
    await waitFor(() => monitor!.view('c1')?.verdict === 'unhealthy', { timeoutMs: 4_000, intervalMs: 20, message: 'unhealthy' });
    const took = Date.now() - t1;
    const firstFailure = probes.find((p) => p.at >= t1 && p.status === 503)!.at;
    // Two failures one interval apart: unhealthy one interval after the first failure, no sooner; at most two intervals after the switch.
    expect(Date.now() - firstFailure).toBeGreaterThanOrEqual(900);
    expect(took).toBeLessThan(2_300);
    expect(monitor.view('c1')?.lastProbe).toMatchObject({ status: 503, body: 'down', error: null });
    expect(monitor.notServing()).toEqual(new Set(['c1']));

    answer = { status: 200, body: 'ok', delayMs: 0 };
    await waitFor(() => monitor!.view('c1')?.verdict === 'healthy', { timeoutMs: 4_000, intervalMs: 20, message: 'healthy again' });
  });

  it('failures inside the start period do not count; after it they do', async () => {
    answer = { status: 500, body: 'warming', delayMs: 0 };
    monitor = new HealthMonitor({ logger: silentLogger });
    monitor.track('c2', { serviceId: 's', check: check({ startPeriodSeconds: 2, unhealthyThreshold: 1 }), host: '127.0.0.1', startedAt: 'a' });
    await new Promise((r) => setTimeout(r, 1_500));
    expect(monitor.view('c2')?.verdict).toBe('starting');
    await waitFor(() => monitor!.view('c2')?.verdict === 'unhealthy', { timeoutMs: 3_000, intervalMs: 20, message: 'unhealthy after the start period' });
  });

  it('untracked: its probes stop', async () => {
    answer = { status: 200, body: 'ok', delayMs: 0 };
    monitor = new HealthMonitor({ logger: silentLogger });
    monitor.track('c3', { serviceId: 's', check: check(), host: '127.0.0.1', startedAt: 'a' });
    await waitFor(() => monitor!.view('c3')?.verdict === 'healthy', { timeoutMs: 2_000, message: 'healthy' });
    monitor.retain(new Set());
    const before = probes.length;
    await new Promise((r) => setTimeout(r, 1_300));
    expect(probes.length).toBe(before);
    expect(monitor.view('c3')).toBeUndefined();
  });
});

describe('dockerEndpoints', () => {
  it('marks containers the health monitor says must not serve (their address stays answerable, never picked)', async () => {
    const row = (id: string, ip: string) => ({ Id: id, Status: 'Up 3 seconds', Labels: { 'tether.service': 'svc' }, NetworkSettings: { Networks: { net: { IPAddress: ip } } } });
    const docker = { listContainers: async () => [row('a', '10.0.0.2'), row('b', '10.0.0.3')] } as unknown as Docker;
    let excluded = new Set<string>(['b']);
    const source = dockerEndpoints(docker, { network: 'net', notServing: () => excluded });
    expect((await source()).get('svc')).toEqual([{ id: 'a', ip: '10.0.0.2' }, { id: 'b', ip: '10.0.0.3', serving: false }]);
    excluded = new Set();
    expect((await source()).get('svc')).toEqual([{ id: 'a', ip: '10.0.0.2' }, { id: 'b', ip: '10.0.0.3' }]);
  });
});
