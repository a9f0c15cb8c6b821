import { afterEach, describe, expect, it } from 'vitest';
import { CLOSE_CODES, FIELD_LIMITS, formatRetryHint, type Workload } from '@tether/protocol';
import { ManualClock, waitFor } from '@tether/testkit';
import type { PanelConnection} from '../../src/connection/panel-connection.js';
import { agentConnectUrl } from '../../src/connection/panel-connection.js';
import type { DeployOutcome, Observation, WorkloadController } from '../../src/controllers.js';
import { FakePanel, testConnection } from './fake-panel.js';

class ScriptedWorkloads implements WorkloadController {
  desired: Workload[][] = [];
  deploys: Workload[] = [];
  pending: ((o: DeployOutcome) => void)[] = [];
  async start() {}
  async stop() {}
  async observe(): Promise<Observation> {
    return { containers: [], runtime: { available: true, error: null } };
  }
  setDesired(w: Workload[]) {
    this.desired.push(w);
  }
  deploy(w: Workload): Promise<DeployOutcome> {
    this.deploys.push(w);
    return new Promise((resolve) => this.pending.push(resolve));
  }
}

const workload: Workload = { serviceId: 's1', serviceName: 'web', deploymentId: 'd1', image: 'img', env: {}, port: 80, replicas: 1 };
const panels: FakePanel[] = [];
const connections: PanelConnection[] = [];

afterEach(async () => {
  await Promise.all(connections.splice(0).map((c) => c.stop()));
  await Promise.all(panels.splice(0).map((p) => p.stop()));
});

async function setup(options: { reconnect?: Partial<PanelConnection['options' & never]>; random?: () => number; min?: number; max?: number; clock?: ManualClock } = {}) {
  const panel = new FakePanel();
  panels.push(panel);
  const url = await panel.start();
  const workloads = new ScriptedWorkloads();
  const connection = testConnection(url, {
    workloads,
    reconnect: { minMs: options.min ?? 50, maxMs: options.max ?? 400, healthySessionMs: 300, connectTimeoutMs: 1_000 },
    ...(options.random ? { random: options.random } : {}),
    ...(options.clock ? { clock: options.clock } : {}),
  });

  connections.push(connection);
  return { panel, workloads, connection };
}

describe('panel connection', () => {
  it('builds the connect URL from http(s) and ws(s) panel URLs', () => {
    expect(agentConnectUrl('http://panel:8080')).toBe('ws://panel:8080/v1/agent/connect');
    expect(agentConnectUrl('https://panel.example.com/base/')).toBe('wss://panel.example.com/base/v1/agent/connect');
  });

  it('says hello, then heartbeats at the cadence welcome gave, with a growing sequence', async () => {
    const { panel, connection } = await setup();
    panel.autoWelcome = { heartbeatIntervalMs: 100 };
    connection.start();
    const conn = await panel.waitForConnection(1);
    const hello = await conn.waitFor((m) => m.type === 'hello');
    expect(hello).toMatchObject({ node: 'edge-1', protocolVersion: 1, runtime: { available: true } });
    await conn.waitFor((m) => m.type === 'heartbeat' && m.seq === 3, 2_000);
    const beats = conn.received.filter((m) => m.type === 'heartbeat');
    expect(beats.map((b) => (b as { seq: number }).seq)).toEqual([0, 1, 2, 3]);
    expect(connection.state).toBe('ready');
  });

  it('ACKs a deploy at once, before the work finishes, and answers ping with pong', async () => {
    const { panel, workloads, connection } = await setup();
    connection.start();
    const conn = await panel.waitForConnection(1);
    await waitFor(() => connection.state === 'ready');
    conn.send({ type: 'deploy', id: 'p-9', workload });
    await conn.waitFor((m) => m.type === 'ack' && m.ref === 'p-9');
    expect(workloads.deploys).toHaveLength(1);
    expect(conn.received.some((m) => m.type === 'deploy.result')).toBe(false);
    workloads.pending[0]!({ status: 'failed', code: 'CONTAINER_EXITED', reason: 'exited with code 2' });
    const result = await conn.waitFor((m) => m.type === 'deploy.result');
    expect(result).toMatchObject({ deploymentId: 'd1', status: 'failed', code: 'CONTAINER_EXITED' });
    conn.send({ type: 'ping', id: 'p-10' });
    await conn.waitFor((m) => m.type === 'pong' && m.ref === 'p-10');
    conn.send({ type: 'workloads', id: 'p-11', workloads: [workload] });
    await conn.waitFor((m) => m.type === 'ack' && m.ref === 'p-11');
    expect(workloads.desired).toEqual([[workload]]);
  });

  it('a silent panel is dropped within the read-idle deadline (not before) and the agent reconnects', async () => {
    const { panel, connection } = await setup();
    panel.autoWelcome = { agentIdleTimeoutMs: 300, heartbeatIntervalMs: 60_000 };
    // The deadline runs from the last frame (welcome), taken when the agent handles it, not when the test polls.
    const ready = new Promise<number>((resolve) => connection.once('ready', () => resolve(Date.now())));
    connection.start();
    const conn = await panel.waitForConnection(1);
    const readyAt = await ready;
    await waitFor(() => conn.closedAt, { timeoutMs: 3_000 });
    const after = conn.closedAt! - readyAt;
    expect(after).toBeGreaterThanOrEqual(290);
    expect(after).toBeLessThanOrEqual(1_300);
    await panel.waitForConnection(2, 3_000);
  });

  it('never drops the panel a millisecond early, though its timer fires 1 ms early (injected clock)', async () => {
    const clock = new ManualClock(1);
    const { panel, connection } = await setup({ clock });
    panel.autoWelcome = { agentIdleTimeoutMs: 300, heartbeatIntervalMs: 60_000 };
    const ready = new Promise<void>((resolve) => connection.once('ready', () => resolve()));
    connection.start();
    const conn = await panel.waitForConnection(1);
    await ready;
    clock.advance(299.75);
    await new Promise((r) => setTimeout(r, 100));
    expect(conn.closedAt).toBeNull();
    clock.advance(1.25);
    await waitFor(() => conn.closedAt, { timeoutMs: 2_000 });
  });

  it('reconnects with exponential backoff and full jitter, capped, reset after a healthy session', async () => {
    const { panel, connection } = await setup({ random: () => 0.999, min: 50, max: 400 });
    panel.refuseWith = 503; // every attempt is refused until the test lets one through
    const delays: number[] = [];
    connection.on('closed', (e) => delays.push(e.retryInMs));
    connection.start();
    await waitFor(() => delays.length >= 5, { timeoutMs: 5_000 });
    expect(delays.slice(0, 5)).toEqual([49, 99, 199, 399, 399]);
    panel.refuseWith = null;
    await waitFor(() => connection.state === 'ready', { timeoutMs: 3_000 });
    await new Promise((r) => setTimeout(r, 350)); // longer than healthySessionMs
    panel.connections.at(-1)!.socket.terminate();
    await waitFor(() => delays.length >= 6);
    expect(delays[5]).toBe(49);
  });

  it("a busy panel's Retry-After sets a hinted agent's next delay only; the hinted window goes on after it", async () => {
    const { panel, connection } = await setup({ random: () => 0.5, max: 10_000 });
    const delays: number[] = [];
    connection.on('closed', (e) => delays.push(e.retryInMs));
    connection.start();
    await waitFor(() => connection.state === 'ready', { timeoutMs: 3_000 });
    panel.refuseWith = 503;
    panel.retryAfterS = 1;
    panel.connections.at(-1)!.socket.close(CLOSE_CODES.SERVICE_RESTART, formatRetryHint(4_000));
    await waitFor(() => delays.length >= 2, { timeoutMs: 5_000 });
    panel.retryAfterS = null;
    await waitFor(() => delays.length >= 3, { timeoutMs: 5_000 });
    // The hint's first attempt within [0, W); the busy panel's 1 s within [1, 2) s; then the window again, [W/2, W].
    expect(delays.slice(0, 3)).toEqual([2_000, 1_500, 3_000]);
  });

  it('an unknown or decommissioned token (401/403) keeps retrying, at the backoff cap', async () => {
    const { panel, connection } = await setup({ max: 400 });
    panel.refuseWith = 403;
    const delays: number[] = [];
    connection.on('closed', (e) => delays.push(e.retryInMs));
    connection.start();
    await waitFor(() => delays.length >= 2, { timeoutMs: 3_000 });
    expect(delays.slice(0, 2)).toEqual([400, 400]);
  });

  it('keeps a deploy result produced while disconnected and delivers it on the next session', async () => {
    const { panel, workloads, connection } = await setup();
    connection.start();
    const first = await panel.waitForConnection(1);
    await waitFor(() => connection.state === 'ready');
    first.send({ type: 'deploy', id: 'p-1', workload });
    await first.waitFor((m) => m.type === 'ack');
    panel.autoWelcome = null; // the next session waits for the test's welcome
    const closed = new Promise((resolve) => connection.once('closed', resolve));
    first.socket.terminate();
    await closed;
    workloads.pending[0]!({ status: 'running', reason: 'started' });
    const second = await panel.waitForConnection(2, 3_000);
    await second.waitFor((m) => m.type === 'hello');
    await new Promise((r) => setTimeout(r, 50));
    expect(second.received.some((m) => m.type === 'deploy.result')).toBe(false); // not before welcome
    second.welcome();
    const result = await second.waitFor((m) => m.type === 'deploy.result');
    expect(result).toMatchObject({ deploymentId: 'd1', status: 'running' });
    expect(second.received.findIndex((m) => m.type === 'hello')).toBeLessThan(second.received.indexOf(result));
  });

  it('answers an invalid panel frame with a coded error and keeps the session', async () => {
    const { panel, connection } = await setup();
    connection.start();
    const conn = await panel.waitForConnection(1);
    await waitFor(() => connection.state === 'ready');
    conn.socket.send('{"type":"deploy","id":"bad"}');
    const error = await conn.waitFor((m) => m.type === 'error');
    expect(error).toMatchObject({ code: 'MISSING_FIELD', ref: 'bad' });
    conn.send({ type: 'ping', id: 'p-2' });
    await conn.waitFor((m) => m.type === 'pong');
    expect(connection.state).toBe('ready');
  });

  it('refuses, with UNEXPECTED_MESSAGE, frames of a capability the session did not agree on, and frames only a panel receives', async () => {
    const { panel, connection } = await setup();
    connection.start();
    const conn = await panel.waitForConnection(1);
    await waitFor(() => connection.state === 'ready');
    // This agent has no log streams and its workloads cannot remove volumes; a welcome is the panel's, not a reply.
    conn.send({ type: 'logs.open', id: 'p-20', streamId: 's1', serviceId: 'svc', tail: null, since: null, follow: false, credit: 1_000 });
    conn.send({ type: 'volumes.remove', id: 'p-21', serviceId: 'svc' });
    for (const ref of ['p-20', 'p-21']) {
      expect(await conn.waitFor((m) => m.type === 'error' && m.ref === ref)).toMatchObject({ code: 'UNEXPECTED_MESSAGE' });
    }
    expect(conn.received.some((m) => m.type === 'ack' && (m.ref === 'p-20' || m.ref === 'p-21'))).toBe(false);
    conn.send({ type: 'ping', id: 'p-22' });
    await conn.waitFor((m) => m.type === 'pong' && m.ref === 'p-22');
    expect(connection.state).toBe('ready');
  });

  it('sanitises free text before sending: a crashed container\'s output with NUL and escapes, a deploy failure of the agent itself', async () => {
    const { panel, workloads, connection } = await setup();
    connection.start();
    const conn = await panel.waitForConnection(1);
    await waitFor(() => connection.state === 'ready');
    conn.send({ type: 'deploy', id: 'p-1', workload });
    await conn.waitFor((m) => m.type === 'ack');
    const output = `exited with code 1; last output: boom\u0000\u001b[31mred\r${'x'.repeat(5_000)}`;
    workloads.pending[0]!({ status: 'failed', code: 'CONTAINER_EXITED', reason: output });
    const result = await conn.waitFor((m) => m.type === 'deploy.result');
    if (result.type !== 'deploy.result') throw new Error('unreachable');
    expect(result.reason.startsWith('exited with code 1; last output: boom\\u0000\\u001b[31mred\\u000dxxx')).toBe(true);
    expect(result.reason.includes('\u0000')).toBe(false);
    expect(result.reason.length).toBeLessThanOrEqual(FIELD_LIMITS.text);

    // A deploy that throws inside the agent is reported with the catalogued AGENT_ERROR code.
    workloads.deploy = () => Promise.reject(new Error('bug\u0000here'));
    conn.send({ type: 'deploy', id: 'p-2', workload: { ...workload, deploymentId: 'd2' } });
    const failed = await conn.waitFor((m) => m.type === 'deploy.result' && m.deploymentId === 'd2');
    expect(failed).toMatchObject({ status: 'failed', code: 'AGENT_ERROR', reason: 'bug\\u0000here' });
  });
});
