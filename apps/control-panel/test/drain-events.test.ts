import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CAPABILITIES, type PanelMessage } from '@tether/protocol';
import { sleep, waitFor } from '@tether/testkit';
import { startCli } from './helpers/cli-process.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';
import { RawAgent } from './helpers/raw-agent.js';
import { openTextStream, startHeldRequest, type TextStream } from './helpers/text-stream.js';

// A deployment's event stream and the CLI's waits around its drain (issue 22): on an agent that reports drains
// the stream stays open past running until deploy.drained (then `event: drained` ends it), or until drainSeconds +
// the report grace ran out; for an older agent it ends at running as before; ?wait= answers at running either way.
// Real PostgreSQL, real HTTP, a scripted agent socket, and the real `tether` binary.

const GRACE_MS = 500;
type Deploy = Extract<PanelMessage, { type: 'deploy' }>;
let panel: Panel;
let teamId: string;
let configDir: string;

beforeAll(async () => {
  panel = await startPanel({ env: { TETHER_DRAIN_REPORT_GRACE_MS: String(GRACE_MS), TETHER_DEPLOYMENT_WATCH_MS: '50' } });
  teamId = (await panel.api('POST', '/v1/teams', { name: `drain-events-${process.pid}` })).body.id;
  configDir = mkdtempSync(path.join(os.tmpdir(), 'tether-cli-drain-'));
});
afterAll(async () => {
  await panel?.close();
  if (configDir) rmSync(configDir, { recursive: true, force: true });
});

let n = 0;
async function setup(capabilities?: string[], drainSeconds?: number) {
  const node = await panel.createNode(`de${++n}-${process.pid}`);
  const agent = await RawAgent.connect({ url: panel.url, token: node.token, ...(capabilities ? { capabilities } : {}) });
  await waitFor(() => panel.app.agentSide.registry.get(node.id), { timeoutMs: 5_000, message: 'session' });
  const svc = await panel.api('POST', '/v1/services', { teamId, name: `de${n}`, image: 'tether-test/busybox:1', node: node.name, ...(drainSeconds === undefined ? {} : { drainSeconds }) });
  expect(svc.status).toBe(201);
  return { node, agent, serviceId: svc.body.id as string };
}

const running = (agent: RawAgent, deploymentId: string) => agent.send({ type: 'deploy.result', id: `r-${deploymentId}`, deploymentId, status: 'running', reason: 'started', code: null });
const drained = (agent: RawAgent, deploymentId: string, open: number | null, cut: number | null) =>
  agent.send({ type: 'deploy.drained', id: `d-${deploymentId}`, deploymentId, connectionsOpenAtSwitch: open, connectionsCut: cut, drainEndedAt: new Date().toISOString() });
const auth = () => ({ authorization: `Bearer ${panel.operatorToken}` });
const events = (stream: TextStream) => [...stream.text.matchAll(/^event: (\S+)\nid: \d+\ndata: (.*)$/gm)].map((m) => ({ event: m[1]!, data: JSON.parse(m[2]!) }));

describe('the event stream around a drain', () => {
  it('an agent that reports drains: open past running until deploy.drained, then event: drained with the counts ends it', async () => {
    const { agent, serviceId } = await setup([CAPABILITIES.WORKLOAD_DRAIN]);
    const { body: dep } = await panel.api('POST', `/v1/services/${serviceId}/deployments`, {});
    const stream = await openTextStream(`${panel.url}/v1/deployments/${dep.id}/events`, { headers: auth() });
    running(agent, dep.id);
    await waitFor(() => events(stream).some((e) => e.data.status === 'running'), { message: 'running event' });
    await sleep(400);
    expect(stream.endedAt).toBeNull();
    expect(events(stream).at(-1)).toMatchObject({ event: 'deployment', data: { status: 'running', final: true, reportsDrain: true, drainEndedAt: null } });
    drained(agent, dep.id, 3, 1);
    await stream.ended;
    expect(events(stream).at(-1)).toMatchObject({ event: 'drained', data: { status: 'running', final: true, connectionsOpenAtSwitch: 3, connectionsCut: 1, drainEndedAt: expect.any(String) } });
    // One drained event, and no second `deployment` event for the drain alone.
    expect(events(stream).map((e) => e.event)).toEqual([...events(stream).slice(0, -1).map(() => 'deployment'), 'drained']);
    expect(events(stream).filter((e) => e.data.status === 'running')).toHaveLength(2);
    // Opened after the drain: the state, then drained, at once.
    const late = await openTextStream(`${panel.url}/v1/deployments/${dep.id}/events`, { headers: auth() });
    await late.ended;
    expect(events(late).map((e) => e.event)).toEqual(['deployment', 'drained']);
    agent.close();
  });

  it('an older agent: the stream ends at running, without a drained event', async () => {
    const { agent, serviceId } = await setup();
    const { body: dep } = await panel.api('POST', `/v1/services/${serviceId}/deployments`, {});
    const stream = await openTextStream(`${panel.url}/v1/deployments/${dep.id}/events`, { headers: auth() });
    running(agent, dep.id);
    await stream.ended;
    expect(events(stream).at(-1)).toMatchObject({ event: 'deployment', data: { status: 'running', final: true, reportsDrain: false } });
    expect(events(stream).some((e) => e.event === 'drained')).toBe(false);
    agent.close();
  });

  it('?wait= answers at running while the drain goes on', async () => {
    const { agent, serviceId } = await setup([CAPABILITIES.WORKLOAD_DRAIN]);
    const held = startHeldRequest(`${panel.url}/v1/services/${serviceId}/deployments?wait=30`, { method: 'POST', headers: auth() });
    const deploy = await agent.waitFor<Deploy>((m) => m.type === 'deploy');
    running(agent, deploy.workload.deploymentId);
    await held.ended;
    expect(held.status).toBe(200);
    expect(JSON.parse(held.text)).toMatchObject({ status: 'running', final: true, reportsDrain: true, drainEndedAt: null });
    agent.close();
  });

  it('an agent that never reports: the stream ends drainSeconds + the grace after running, drained with drainEndedAt null', async () => {
    const { agent, serviceId } = await setup([CAPABILITIES.WORKLOAD_DRAIN], 1);
    const { body: dep } = await panel.api('POST', `/v1/services/${serviceId}/deployments`, {});
    const stream = await openTextStream(`${panel.url}/v1/deployments/${dep.id}/events`, { headers: auth() });
    running(agent, dep.id);
    const runningAt = (await waitFor(async () => (await panel.prisma.deployment.findUniqueOrThrow({ where: { id: dep.id } })).runningAt)).getTime();
    const endedAt = await stream.ended;
    const after = Date.now() - (performance.now() - endedAt) - runningAt;
    console.log(`stream without a drain report ended ${after.toFixed(0)} ms after runningAt (bound ${1000 + GRACE_MS} ms)`);
    expect(after).toBeGreaterThanOrEqual(1000 + GRACE_MS - 20);
    expect(after).toBeLessThan(1000 + GRACE_MS + 1500);
    expect(events(stream).at(-1)).toMatchObject({ event: 'drained', data: { status: 'running', drainEndedAt: null, connectionsCut: null } });
    agent.close();
  });
});

describe('tether deploy --wait / --wait-drain against a real panel', () => {
  const cli = (...args: string[]) => startCli(args, { configDir, env: { TETHER_URL: panel.url, TETHER_TOKEN: panel.operatorToken } });

  it('--wait returns at running, before the drain ended; --wait-drain waits for it and prints the counts', async () => {
    const { agent, serviceId } = await setup([CAPABILITIES.WORKLOAD_DRAIN]);
    const quick = cli('deploy', serviceId, '--wait', '--drain-seconds', '8');
    const first = await agent.waitFor<Deploy>((m) => m.type === 'deploy');
    expect(first.workload.drainSeconds).toBe(8);
    running(agent, first.workload.deploymentId);
    const q = await quick.done;
    expect(q.code, q.stderr).toBe(0);
    expect(q.stdout).toContain(`deployment ${first.workload.deploymentId} running after`);
    expect(q.stdout).not.toContain('drain ended');

    const slow = cli('deploy', serviceId, '--wait-drain');
    const second = await agent.waitFor<Deploy>((m) => m.type === 'deploy' && m.workload.deploymentId !== first.workload.deploymentId);
    running(agent, second.workload.deploymentId);
    // Said at once, while the drain goes on.
    await waitFor(() => slow.stdout().includes(`deployment ${second.workload.deploymentId} running after`) && slow.stdout().includes('waiting for the drain'), { message: 'running line' });
    await sleep(300);
    expect(slow.child.exitCode, slow.stdout() + slow.stderr()).toBeNull();
    drained(agent, second.workload.deploymentId, 3, 1);
    const s = await slow.done;
    expect(s.code, s.stderr).toBe(0);
    expect(s.stdout).toMatch(/drain ended after [\d.]+s \(.+\): 3 connections open at the switch, 1 cut at the deadline/);
    agent.close();
  });

  it("--wait-drain with counts the proxy cannot give, and on an agent that reports no drains", async () => {
    const counted = await setup([CAPABILITIES.WORKLOAD_DRAIN]);
    const run = cli('deploy', counted.serviceId, '--wait-drain');
    const dep = await counted.agent.waitFor<Deploy>((m) => m.type === 'deploy');
    running(counted.agent, dep.workload.deploymentId);
    drained(counted.agent, dep.workload.deploymentId, null, null);
    const r = await run.done;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain("connections not counted by this node's proxy");
    counted.agent.close();

    const old = await setup();
    const plain = cli('deploy', old.serviceId, '--wait-drain');
    const oldDep = await old.agent.waitFor<Deploy>((m) => m.type === 'deploy');
    running(old.agent, oldDep.workload.deploymentId);
    const p = await plain.done;
    expect(p.code, p.stderr).toBe(0);
    expect(p.stdout).toContain('drain not reported');
    old.agent.close();
  });

  it('--drain-seconds outside 0-3600 is a usage error (exit 2), nothing sent', async () => {
    for (const value of ['-1', '3601', '1.5', 'x']) {
      const r = await cli('deploy', 'whatever', `--drain-seconds=${value}`).done;
      expect(r.code, value).toBe(2);
      expect(r.stderr).toContain('--drain-seconds');
    }
  });
});
