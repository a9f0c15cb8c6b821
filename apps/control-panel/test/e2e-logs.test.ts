import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import { dockerApi, ensureDocker, ensurePrinterImage, sleep, waitFor } from '@tether/testkit';
import { startAgentProcess, type AgentProcess } from './helpers/agent-process.js';
import { startCli } from './helpers/cli-process.js';
import { readLogs, type LogRecord } from './helpers/log-reader.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { allocationsOn } from './helpers/deploy-answer.js';

// Container logs end to end: REST → panel → the node's session → a real
// agent process → Docker's log streams, and back as NDJSON, with credit.

const docker = await ensureDocker();
const STREAMS_PER_NODE = 4;
const RATE = 1024 * 1024;
const WINDOW = 256 * 1024;

/** Resident memory of a process, in bytes (Linux). */
const rss = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;
const mb = (bytes: number) => Math.round(bytes / 1e5) / 10;

describe.skipIf(!docker.available)('logs through the session, end to end', () => {
  let panel: Panel;
  let agent: AgentProcess;
  let image: string;
  let token: string;
  let otherToken: string;
  let nodeName: string;
  const services: Record<string, string> = {};

  beforeAll(async () => {
    image = await ensurePrinterImage();
    panel = await startPanel({
      env: { TETHER_HEARTBEAT_INTERVAL_MS: '500', TETHER_DEPLOYMENT_WATCH_MS: '50', TETHER_LOG_STREAMS_PER_NODE: String(STREAMS_PER_NODE), TETHER_LOG_STREAM_BYTES_PER_SEC: String(RATE), TETHER_LOG_WINDOW_BYTES: String(WINDOW) },
    });
    const team = await panel.api('POST', '/v1/teams', { name: `logs-${process.pid}` });
    token = (await panel.api('POST', `/v1/teams/${team.body.id}/tokens`, { name: 'logs' })).body.token;
    const other = await panel.api('POST', '/v1/teams', { name: `logs-other-${process.pid}` });
    otherToken = (await panel.api('POST', `/v1/teams/${other.body.id}/tokens`, { name: 'other' })).body.token;
    const node = await panel.createNode(`logs-${process.pid}`);
    nodeName = node.name;
    agent = await startAgentProcess({
      panelUrl: panel.url,
      token: node.token,
      nodeName,
      runtime: 'docker',
      env: { TETHER_MIN_READY_MS: '300', TETHER_DRAIN_MS: '100', TETHER_STOP_TIMEOUT_MS: '2000' },
    });
    await waitFor(() => panel.app.agentSide.registry.get(node.id), { timeoutMs: 10_000, message: 'agent session' });
    for (const [name, env] of Object.entries({ printer: {}, garbage: { GARBAGE: '1', INTERVAL: '1' }, burst: { BURST: '500' } })) {
      const created = await panel.api('POST', '/v1/services', { name, image, env, node: nodeName }, token);
      expect(created.status).toBe(201);
      services[name] = created.body.id;
    }
    for (const name of ['printer', 'garbage', 'burst']) {
      const deployed = await panel.api('POST', `/v1/services/${services[name]}/deployments?wait=30`, undefined, token);
      expect(deployed.body).toMatchObject({ status: 'running', final: true });
    }
  });
  afterEach((context) => {
    if (context.task.result?.state === 'fail') console.error(`--- agent output:\n${agent?.process.output().slice(-4_000)}`);
  });
  afterAll(async () => {
    await agent?.destroy();
    await panel?.close();
  });

  const logsUrl = (service: string, query: string) => `${panel.url}/v1/services/${services[service]}/logs?${query}`;
  const numbers = (records: LogRecord[], stream = 'stdout') => records.filter((r) => r.stream === stream).map((r) => Number(/ (\d+)/.exec(r.text!)![1]));
  const consecutive = (ns: number[]) => ns.every((n, i) => i === 0 || n === ns[i - 1]! + 1);

  it('tail=N answers the last N lines in order, each naming replica, stream and time, then an END_OF_LOGS line', async () => {
    // The replica is its container's name: `…-<service>-<deployment>-<index>`, or, managed by allocations, the allocation's id last (docs/api.md).
    const replicaName = allocationsOn(panel) ? /-printer-\w+-al_[0-9a-f-]{36}$/ : /-printer-\w+-0$/;
    await sleep(1_500);
    const reader = await readLogs(logsUrl('printer', 'tail=20'), token);
    expect(reader.status).toBe(200);
    const end = await reader.done;
    expect(end).toMatchObject({ type: 'end', code: 'END_OF_LOGS' });
    const logs = reader.logs();
    expect(logs).toHaveLength(20);
    const stdout = numbers(logs);
    expect(stdout.length).toBeGreaterThanOrEqual(15);
    expect(consecutive(stdout)).toBe(true);
    for (const r of logs) expect(r).toEqual({ type: 'log', replica: expect.stringMatching(replicaName), containerId: expect.stringMatching(/^[0-9a-f]{64}$/), stream: expect.stringMatching(/^std(out|err)$/), time: expect.stringMatching(/^\d{4}-\d\d-\d\dT[\d:.]+Z$/), text: expect.stringMatching(/^line \d+( to stderr)?$/) });
    const times = logs.map((r) => r.time!);
    expect([...times].sort()).toEqual(times);
    // The stderr lines come interleaved at their place: line 5k on stderr follows line 5k on stdout.
    for (const n of numbers(logs, 'stderr')) expect(n % 5).toBe(0);
    // Retention: the agent created the container with json-file rotation (docs/operations.md defaults).
    const inspect = JSON.parse((await dockerApi('GET', `/containers/${logs[0]!.containerId}/json`)).body) as { HostConfig: { LogConfig: unknown } };
    expect(inspect.HostConfig.LogConfig).toEqual({ Type: 'json-file', Config: { 'max-size': '10m', 'max-file': '3' } });
  });

  it('follow streams new lines in order until the client leaves; the stream is then gone on the panel', async () => {
    const reader = await readLogs(logsUrl('printer', 'tail=0&follow=1'), token);
    expect(reader.status).toBe(200);
    await waitFor(() => (reader.logs().filter((r) => r.stream === 'stdout').length >= 20 ? true : undefined), { timeoutMs: 10_000, message: '20 followed lines' });
    const ns = numbers(reader.logs());
    expect(consecutive(ns)).toBe(true);
    expect(panel.app.agentSide.logs.size).toBe(1);
    reader.close();
    await waitFor(() => (panel.app.agentSide.logs.size === 0 ? true : undefined), { timeoutMs: 2_000, message: 'stream closed on the panel' });

  });

  it('a container writing binary garbage comes through sanitised (invalid UTF-8 replaced, control characters escaped)', async () => {
    const reader = await readLogs(logsUrl('garbage', 'tail=100'), token);
    await reader.done;
    const line = reader.logs().find((r) => r.text!.startsWith('bin:'));
    expect(line?.text).toBe('bin:\ufffd\ufffd|nul:\\u0000|esc:\\u001b[31m|cr:\\u000d|end');
  });

  it('follow continues on the new containers after a redeploy (the agent follows the service label, not a container)', async () => {
    const reader = await readLogs(logsUrl('printer', 'tail=1&follow=1'), token);
    await waitFor(() => (reader.logs().length >= 3 ? true : undefined), { timeoutMs: 5_000, message: 'first lines' });
    const before = reader.logs()[0]!.containerId;
    expect((await panel.api('PATCH', `/v1/services/${services.printer}`, { env: { PREFIX: 'v2' } }, token)).status).toBe(200);
    const deployed = await panel.api('POST', `/v1/services/${services.printer}/deployments?wait=30`, undefined, token);
    expect(deployed.body).toMatchObject({ status: 'running' });
    const v2 = await waitFor(() => reader.logs().find((r) => r.text!.startsWith('v2 ')), { timeoutMs: 10_000, message: 'a line of the new container' });
    expect(v2.containerId).not.toBe(before);
    // The new container's lines start at its first, in order.
    await waitFor(() => (reader.logs().filter((r) => r.text!.startsWith('v2 ') && r.stream === 'stdout').length >= 5 ? true : undefined), { timeoutMs: 5_000, message: '5 new lines' });
    const fresh = reader.logs().filter((r) => r.text!.startsWith('v2 '));
    expect(numbers(fresh).slice(0, 5)).toEqual([1, 2, 3, 4, 5]);
    reader.close();
  });

  it('another team gets 404 for the logs; a bad since is 400; the per-node stream cap answers 429 LOG_STREAMS_EXHAUSTED', async () => {
    const other = await fetch(logsUrl('printer', 'tail=1'), { headers: { authorization: `Bearer ${otherToken}` } });
    expect(other.status).toBe(404);
    expect(((await other.json()) as { error: { code: string } }).error.code).toBe('NOT_FOUND');
    const bad = await fetch(logsUrl('printer', 'since=yesterday'), { headers: { authorization: `Bearer ${token}` } });
    expect(bad.status).toBe(400);
    const open = [];
    for (let i = 0; i < STREAMS_PER_NODE; i += 1) open.push(await readLogs(logsUrl('printer', 'tail=0&follow=1'), token));
    const refused = await fetch(logsUrl('printer', 'tail=0&follow=1'), { headers: { authorization: `Bearer ${token}` } });
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('LOG_STREAMS_EXHAUSTED');
    for (const r of open) r.close();
    await waitFor(() => (panel.app.agentSide.logs.size === 0 ? true : undefined), { timeoutMs: 2_000, message: 'streams closed' });
  });

  it('tether logs -f prints lines and ends cleanly on Ctrl-C (exit 0, nothing on stderr)', async () => {
    const run = startCli(['logs', 'printer', '-f', '--tail', '3'], { configDir: agent.stateDir, env: { TETHER_URL: panel.url, TETHER_TOKEN: token } });
    await waitFor(() => (run.stdout().split('\n').length > 8 ? true : undefined), { timeoutMs: 10_000, message: 'lines printed' });
    expect(run.stdout()).toMatch(/^\S+ \| v2 \d+$/m);
    const sent = performance.now();
    run.child.kill('SIGINT');
    const result = await run.done;
    expect(result.code).toBe(0);
    expect(result.stderr).toBe('');
    expect(performance.now() - sent).toBeLessThan(2_000);
    await waitFor(() => (panel.app.agentSide.logs.size === 0 ? true : undefined), { timeoutMs: 2_000, message: 'stream closed' });
  });
  it('a stream is held to its rate cap (a LOG_RATE_LIMITED notice), and a reader that stops reading does not grow the agent\'s memory', async () => {
    const pid = agent.process.pid!;
    // A reader that keeps reading: about RATE bytes a second come, though the container writes 5 MB/s.
    const live = await readLogs(logsUrl('burst', 'tail=0&follow=1'), token);
    await waitFor(() => (live.logs().length > 0 ? true : undefined), { timeoutMs: 5_000, message: 'first burst lines' });
    const startCount = live.logs().length;
    const started = performance.now();
    await sleep(3_000);
    const seconds = (performance.now() - started) / 1000;
    const bytes = live.logs().slice(startCount).reduce((n, r) => n + r.text!.length + 150, 0);
    console.log(`rate cap ${RATE} B/s: ${Math.round(bytes / seconds)} B/s arrived over ${seconds.toFixed(1)} s`);
    expect(live.records.some((r) => r.type === 'notice' && r.code === 'LOG_RATE_LIMITED')).toBe(true);
    expect(bytes / seconds).toBeLessThan(RATE * 1.3 + WINDOW / seconds);
    expect(bytes / seconds).toBeGreaterThan(RATE * 0.4);
    live.close();

    // A reader that stops: credit stops, the agent's queue fills to its high-water mark, Docker's stream is paused.
    const before = rss(pid);
    const stalled = await readLogs(logsUrl('burst', 'tail=0&follow=1'), token);
    stalled.pause();
    const samples: number[] = [];
    for (let i = 0; i < 8; i += 1) {
      await sleep(1_000);
      samples.push(rss(pid));
    }
    const relayed = [...(panel.app.agentSide.logs as unknown as { streams: Map<string, { granted: number; taken: number }> }).streams.values()][0]!;
    console.log(`stalled reader: agent RSS ${mb(before)} MB before, then ${samples.map(mb).join(', ')} MB; panel: ${relayed.granted} B granted, ${relayed.taken} B taken by the client`);
    // 8 s of a 5 MB/s writer is 40 MB: none of it piles up in the agent.
    expect(Math.max(...samples) - before).toBeLessThan(25e6);
    expect(samples.at(-1)! - samples[2]!).toBeLessThan(10e6);
    expect(relayed.granted - relayed.taken).toBeLessThanOrEqual(WINDOW);
    stalled.close();
    await waitFor(() => (panel.app.agentSide.logs.size === 0 ? true : undefined), { timeoutMs: 2_000, message: 'streams closed' });
  });

  it('the session ending mid-stream ends the stream with a final SESSION_ENDED line; then the node is 503 NODE_UNREACHABLE at once', async () => {
    const reader = await readLogs(logsUrl('printer', 'tail=0&follow=1'), token);
    await waitFor(() => (reader.logs().length >= 3 ? true : undefined), { timeoutMs: 5_000, message: 'lines' });
    await agent.stop();
    const end = await reader.done;
    expect(end).toMatchObject({ type: 'end', code: 'SESSION_ENDED', reason: expect.stringMatching(/^the node's session ended: closed by agent \(1001/) });
    const asked = performance.now();
    const res = await fetch(logsUrl('printer', 'tail=5'), { headers: { authorization: `Bearer ${token}` } });
    const ms = performance.now() - asked;
    expect(res.status).toBe(503);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('NODE_UNREACHABLE');
    expect(ms).toBeLessThan(500);
  });
});
