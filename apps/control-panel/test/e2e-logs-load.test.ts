import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureDocker, ensurePrinterImage, ensureWebImage, sleep, waitFor } from '@tether/testkit';
import { startAgentProcess, type AgentProcess } from './helpers/agent-process.js';
import { readLogs, type LogReader } from './helpers/log-reader.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { expectDeployAccepted } from './helpers/deploy-answer.js';

// Log traffic never delays liveness: 10 followers of a service writing about
// 5 MB/s, on a session with shortened deadlines (idle 2 s, ACK 1 s). The
// session must not be torn down, heartbeats must keep their cadence, a deploy
// on the same session must be ACKed in time, and memory must stay bounded.

const docker = await ensureDocker();
const FOLLOWERS = 10;
const RUN_MS = 12_000;
const HEARTBEAT_MS = 250;
const IDLE_MS = 2_000;
const ACK_MS = 1_000;

const rss = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) * 1024;
const mb = (bytes: number) => (bytes / 1e6).toFixed(1);

describe.skipIf(!docker.available)('logs under load: 10 followers at 5 MB/s do not touch liveness', () => {
  let panel: Panel;
  let agent: AgentProcess;
  let token: string;
  let nodeId: string;
  const ids: Record<string, string> = {};

  beforeAll(async () => {
    const [printer, web] = await Promise.all([ensurePrinterImage(), ensureWebImage()]);
    panel = await startPanel({
      env: {
        TETHER_HEARTBEAT_INTERVAL_MS: String(HEARTBEAT_MS),
        TETHER_PING_INTERVAL_MS: '500',
        TETHER_SESSION_IDLE_MS: String(IDLE_MS),
        TETHER_AGENT_IDLE_MS: String(IDLE_MS),
        TETHER_ACK_TIMEOUT_MS: String(ACK_MS),
        TETHER_DEPLOYMENT_WATCH_MS: '50',
        TETHER_LOG_STREAMS_PER_NODE: String(FOLLOWERS),
        TETHER_LOG_STREAM_BYTES_PER_SEC: String(8 * 1024 * 1024),
      },
    });
    const team = await panel.api('POST', '/v1/teams', { name: `load-${process.pid}` });
    token = (await panel.api('POST', `/v1/teams/${team.body.id}/tokens`, { name: 'load' })).body.token;
    const node = await panel.createNode(`load-${process.pid}`);
    nodeId = node.id;
    agent = await startAgentProcess({ panelUrl: panel.url, token: node.token, nodeName: node.name, runtime: 'docker', env: { TETHER_MIN_READY_MS: '300', TETHER_DRAIN_MS: '100' } });
    await waitFor(() => panel.app.agentSide.registry.get(node.id), { timeoutMs: 10_000, message: 'agent session' });
    for (const [name, image, env] of [['burst', printer, { BURST: '500' }], ['web', web, {}]] as const) {
      ids[name] = (await panel.api('POST', '/v1/services', { name, image, env, node: node.name }, token)).body.id;
    }
    const deployed = await panel.api('POST', `/v1/services/${ids.burst}/deployments?wait=30`, undefined, token);
    expect(deployed.body).toMatchObject({ status: 'running' });
  });
  afterAll(async () => {
    await agent?.destroy();
    await panel?.close();
  });

  it('zero teardowns, heartbeats on cadence, a deploy ACKed in time, bounded RSS on both ends', async () => {
    const session = panel.app.agentSide.registry.get(nodeId)!;
    const teardowns: string[] = [];
    const beats: number[] = [];
    const onClosed = (_s: unknown, t: { reason: string }) => teardowns.push(t.reason);
    const onMessage = (_s: unknown, m: { type: string }) => {
      if (m.type === 'heartbeat') beats.push(performance.now());
    };
    panel.app.agentSide.registry.on('closed', onClosed);
    const unobserve = panel.app.agentSide.frames.observe(onMessage);
    const agentBefore = rss(agent.process.pid);
    const panelBefore = process.memoryUsage().rss;

    const readers: LogReader[] = [];
    for (let i = 0; i < FOLLOWERS; i += 1) readers.push(await readLogs(`${panel.url}/v1/services/${ids.burst}/logs?tail=0&follow=1`, token, { keep: false }));
    const started = performance.now();
    const agentSamples: number[] = [];
    const panelSamples: number[] = [];
    let ackMs = 0;
    const deploy = (async () => {
      await sleep(RUN_MS / 2);
      const asked = performance.now();
      const res = await panel.api('POST', `/v1/services/${ids.web}/deployments`, undefined, token);
      ackMs = performance.now() - asked;
      expectDeployAccepted(panel, res, { serviceId: ids.web });
    })();
    while (performance.now() - started < RUN_MS) {
      await sleep(500);
      agentSamples.push(rss(agent.process.pid));
      panelSamples.push(process.memoryUsage().rss);
    }
    await deploy;
    const seconds = (performance.now() - started) / 1000;
    const perReader = readers.map((r) => r.textBytes / seconds);
    for (const r of readers) r.close();
    panel.app.agentSide.registry.off('closed', onClosed);
    unobserve();

    const gaps = beats.slice(1).map((t, i) => t - beats[i]!);
    const maxGap = Math.max(...gaps);
    console.log(
      `${FOLLOWERS} followers for ${seconds.toFixed(1)} s: ${perReader.map((b) => mb(b)).join(', ')} MB/s of log text each (${mb(perReader.reduce((a, b) => a + b, 0))} MB/s total); ` +
        `heartbeats: ${beats.length}, max gap ${Math.round(maxGap)} ms (cadence ${HEARTBEAT_MS} ms, idle deadline ${IDLE_MS} ms); deploy ACKed in ${Math.round(ackMs)} ms (ACK timeout ${ACK_MS} ms); ` +
        `agent RSS ${mb(agentBefore)} → ${agentSamples.map(mb).join(', ')} MB; panel (test process) RSS ${mb(panelBefore)} → ${panelSamples.map(mb).join(', ')} MB; teardowns: ${teardowns.length}`,
    );
    expect(teardowns).toEqual([]);
    expect(panel.app.agentSide.registry.get(nodeId)).toBe(session);
    // The deploy was ACKed within the ACK timeout: the panel answers 202 only then (else 504 ACK_TIMEOUT and the
    // session is torn down, which `teardowns` would show); managed by allocations it answers 201 at once and the
    // `allocations` frame that carries the release is ACKed under the same timeout (a miss tears the session down too). `ackMs` is the whole REST round trip, printed above;
    // on 2 saturated cores it has reached 1.1 s, most of it the request's own handling, not the agent's ACK.
    // The panel's clock of liveness: no gap between heartbeats reached the idle deadline (a gap that did would be
    // a false teardown). How close it came is printed above; on 2 busy cores it has reached about 1 s, half the
    // deadline, mostly the heartbeat's bounded Docker list call waiting on a busy dockerd.
    expect(maxGap).toBeLessThan(IDLE_MS);
    // Every follower got lines (streams take turns), and the total is real traffic.
    for (const b of perReader) expect(b).toBeGreaterThan(50_000);
    // Bounded, not growing. The agent's RSS is a sawtooth (tens of MB/s of JSON through the garbage collector:
    // 60-100 MB from a collection to the next, about 4 s apart here, the peaks rising while V8 sizes its heap),
    // so means of a few samples or peaks do not compare like with like in 12 s. The floors do: what is left
    // after a collection. A 60 s run on a loaded machine read floors 160 → 183 → 194 → 200 MB over the first
    // 30 s, then flat to the end (peaks 244-281 MB). After the first 2 s, compare the lowest sample of the second
    // half with the lowest of the first (each half spans a collection; 12-28 MB apart in four 12 s runs at load 11-14): a
    // leak of more than about 8 MB/s shows there; the absolute bound below catches credit being ignored.
    const halves = (samples: number[]) => {
      const warm = samples.slice(4);
      return [warm.slice(0, Math.floor(warm.length / 2)), warm.slice(Math.floor(warm.length / 2))] as const;
    };
    const trend = (samples: number[]) => {
      const [first, second] = halves(samples);
      return Math.min(...second) - Math.min(...first);
    };
    expect(Math.max(...agentSamples) - agentBefore).toBeLessThan(250e6);
    expect(trend(agentSamples)).toBeLessThan(50e6);
    expect(Math.max(...panelSamples) - panelBefore).toBeLessThan(150e6);
    expect(trend(panelSamples)).toBeLessThan(50e6);
    await waitFor(() => (panel.app.agentSide.logs.size === 0 ? true : undefined), { timeoutMs: 2_000, message: 'streams closed' });
  });
});
