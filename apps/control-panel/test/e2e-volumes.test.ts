import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { dockerApi, ensureDocker, ensureSecondDaemonSupport, ensureWebImage, secondDaemon, waitFor } from '@tether/testkit';
import { startAgentProcess, type AgentProcess } from './helpers/agent-process.js';
import { runCli } from './helpers/cli-process.js';
import type { VolumeView } from '../src/domain/volumes.js';
import { startPanel, type Panel } from './helpers/panel-harness.js';

// GET /v1/volumes and DELETE /v1/volumes/:id end to end: REST → panel → a real agent process → Docker and
// back through volumes.report; a kept volume's removal through the node's session, refused with the node
// away; and, on a private second dockerd, a "host reboot" (the engine restarted) and a removal ACKed while
// Docker was down that survives an agent restart.

const docker = await ensureDocker();
const daemonSupport = await ensureSecondDaemonSupport();

const AGENT_ENV = {
  TETHER_MIN_READY_MS: '300',
  TETHER_STOP_TIMEOUT_MS: '1000',
  TETHER_START_TIMEOUT_MS: '10000',
  TETHER_RESTART_BACKOFF_MIN_MS: '200',
  TETHER_RESTART_BACKOFF_MAX_MS: '400',
  TETHER_VOLUME_SCAN_INTERVAL_MS: '300',
  // The blob is written after the volume is made: the first measurement sees it empty, the next (1 s on) full.
  TETHER_VOLUME_MEASURE_INTERVAL_MS: '1000',
};

/** 64 blocks of 4096 bytes in /data/blob, a line per start in /data/boots, then a web server. */
const WRITER = [
  'sh',
  '-c',
  'test -f /data/blob || { i=0; while test $i -lt 64; do printf "%4096s" x >> /data/blob; i=$((i+1)); done; }; echo start >> /data/boots; mkdir -p /tmp/w && echo ok > /tmp/w/index.html && exec httpd -f -p 8080 -h /tmp/w',
];
const BLOB_BYTES = 64 * 4096;

type VolumeBody = VolumeView;

describe.skipIf(!docker.available)('volumes end to end', () => {
  let panel: Panel;
  let image: string;
  let teamId: string;
  let customer: string;
  let stranger: string;
  const agents: AgentProcess[] = [];
  const cleanups: (() => Promise<void>)[] = [];

  beforeAll(async () => {
    image = await ensureWebImage();
    panel = await startPanel({ env: { TETHER_HEARTBEAT_INTERVAL_MS: '300', TETHER_PING_INTERVAL_MS: '1000', TETHER_SESSION_IDLE_MS: '3000', TETHER_AGENT_IDLE_MS: '5000' } });
    teamId = (await panel.api('POST', '/v1/teams', { name: `e2e-volumes-${process.pid}` })).body.id;
    customer = (await panel.api('POST', `/v1/teams/${teamId}/tokens`, { name: 'volumes' })).body.token;
    const other = (await panel.api('POST', '/v1/teams', { name: `e2e-volumes-other-${process.pid}` })).body.id;
    stranger = (await panel.api('POST', `/v1/teams/${other}/tokens`, { name: 'stranger' })).body.token;
  });
  afterEach(async (context) => {
    if (context.task.result?.state === 'fail') for (const a of agents) console.error(`--- agent ${a.nodeName}:\n${a.process.output().slice(-6_000)}`);
    const stopping = agents.splice(0);
    await Promise.all(stopping.map((a) => a.stop()));
    for (const a of stopping) await a.destroy();
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });
  afterAll(async () => panel?.close());

  async function startAgent(nodeName: string, token: string, options: { stateDir?: string; env?: Record<string, string> } = {}) {
    const agent = await startAgentProcess({ panelUrl: panel.url, token, nodeName, runtime: 'docker', ...(options.stateDir ? { stateDir: options.stateDir } : {}), env: { ...AGENT_ENV, ...options.env } });
    agents.push(agent);
    return agent;
  }
  async function node(label: string, env?: Record<string, string>) {
    const created = await panel.createNode(`${label}-${process.pid}`);
    const agent = await startAgent(created.name, created.token, { ...(env ? { env } : {}) });
    await waitFor(() => panel.app.agentSide.registry.get(created.id), { timeoutMs: 10_000, message: 'agent session' });
    return { ...created, agent };
  }
  async function deployRunning(serviceId: string) {
    const res = await panel.api('POST', `/v1/services/${serviceId}/deployments?wait=20`, {});
    expect(res.body).toMatchObject({ status: 'running' });
  }
  const volumesOf = async (serviceId: string, token?: string): Promise<VolumeBody[]> => {
    const res = await panel.api('GET', `/v1/volumes?serviceId=${serviceId}`, undefined, token);
    expect(res.status).toBe(200);
    return res.body;
  };
  const listedWhen = (serviceId: string, accept: (v: VolumeBody) => boolean, message: string, timeoutMs = 10_000) =>
    waitFor(async () => (await volumesOf(serviceId)).find(accept), { timeoutMs, intervalMs: 100, message });

  it('lists a volume with its mount and size on disk, keeps it listed as kept after a plain delete, and deletes it only when kept and its node is reachable', async () => {
    const n = await node('vols');
    const svc = await panel.api('POST', '/v1/services', { teamId, name: 'files', image, node: n.name, internalPort: 8080, command: WRITER, volumes: [{ name: 'data', mountPath: '/data' }] });
    expect(svc.status).toBe(201);
    const serviceId = svc.body.id as string;
    cleanups.push(async () => void (await dockerApi('DELETE', `/volumes/tether-${serviceId}-data`)));
    await deployRunning(serviceId);

    // The size is the blob plus the folder's own blocks and the boots file: a few blocks over, never under.
    const listed = await listedWhen(serviceId, (v) => v.sizeBytes !== null && v.sizeBytes >= BLOB_BYTES, 'the volume listed with its size');
    expect(listed).toMatchObject({ nodeId: n.id, serviceName: 'files', teamId, name: 'data', dockerName: `tether-${serviceId}-data`, mountPath: '/data', readOnly: false, kept: false });
    expect(listed.sizeBytes!).toBeLessThan(BLOB_BYTES + 64 * 1024);
    expect(Date.parse(listed.measuredAt!)).toBeGreaterThan(Date.now() - 60_000);
    expect(Date.parse(listed.createdAt!)).toBeGreaterThan(Date.now() - 120_000);
    // A customer sees its team's volumes, another team's customer none of them.
    expect((await volumesOf(serviceId, customer)).map((v) => v.id)).toEqual([listed.id]);
    expect(await volumesOf(serviceId, stranger)).toEqual([]);
    expect((await panel.api('DELETE', `/v1/volumes/${listed.id}`, undefined, stranger)).status).toBe(404);

    // Mounted by its service: 409, and it stays.
    const inUse = await panel.api('DELETE', `/v1/volumes/${listed.id}`, undefined, customer);
    expect(inUse.status).toBe(409);
    expect(inUse.body.error.code).toBe('VOLUME_IN_USE');

    // A plain delete keeps it: listed as kept, with its team and service name.
    expect((await panel.api('DELETE', `/v1/services/${serviceId}`, undefined, customer)).status).toBe(204);
    const kept = (await volumesOf(serviceId, customer))[0]!;
    expect(kept).toMatchObject({ id: listed.id, kept: true, mountPath: null, serviceName: 'files', teamId });
    expect((await panel.api('GET', '/v1/volumes?kept=true', undefined, customer)).body.map((v: VolumeBody) => v.id)).toContain(listed.id);
    expect((await panel.api('GET', '/v1/volumes?kept=false', undefined, customer)).body.map((v: VolumeBody) => v.id)).not.toContain(listed.id);

    // The node away: 503 NODE_UNREACHABLE, the volume and its data stay, listed still.
    const stateDir = n.agent.stateDir;
    await n.agent.stop();
    agents.splice(agents.indexOf(n.agent), 1);
    await waitFor(() => !panel.app.agentSide.registry.get(n.id), { timeoutMs: 10_000, message: 'session gone' });
    // Through the CLI (`tether volumes rm <docker name>`): exit 3, the code printed.
    const configDir = mkdtempSync(path.join(os.tmpdir(), 'tether-cli-volumes-'));
    cleanups.push(async () => rmSync(configDir, { recursive: true, force: true }));
    const cli = (...args: string[]) => runCli(args, { configDir, env: { TETHER_URL: panel.url, TETHER_TOKEN: customer } });
    const listing = await cli('volumes', '--kept');
    expect(listing.code).toBe(0);
    expect(listing.stdout).toMatch(new RegExp(`${n.name}\\s+files\\s+data\\s+\\(kept\\)\\s+2[56]\\d\\.\\d KiB\\s+${listed.id}`));
    const away = await cli('volumes', 'rm', `tether-${serviceId}-data`, '--json');
    expect(away.code).toBe(3);
    expect(JSON.parse(away.stdout).error.code).toBe('NODE_UNREACHABLE');
    expect((await dockerApi('GET', `/volumes/tether-${serviceId}-data`)).status).toBe(200);
    expect((await volumesOf(serviceId, customer)).map((v) => v.id)).toEqual([listed.id]);

    // Back: 202, Docker's volume goes, and with the next report the list says so.
    await startAgent(n.name, n.token, { stateDir });
    await waitFor(() => panel.app.agentSide.registry.get(n.id), { timeoutMs: 10_000, message: 'session back' });
    const removed = await cli('volumes', 'rm', listed.id, '--json');
    expect(removed.code).toBe(0);
    expect(JSON.parse(removed.stdout).removing).toMatchObject({ id: listed.id, kept: true });
    await waitFor(async () => (await dockerApi('GET', `/volumes/tether-${serviceId}-data`)).status === 404, { timeoutMs: 10_000, message: 'docker volume removed' });
    await waitFor(async () => (await volumesOf(serviceId)).length === 0, { timeoutMs: 10_000, message: 'volume unlisted' });
    expect(await volumesOf(serviceId)).toEqual([]);
    expect((await panel.api('DELETE', `/v1/volumes/${listed.id}`)).status).toBe(404);

    // The trail: the refusals (another team's 404, the 409, the 503, the 404 after) and the delete's success row.
    const trail = async () =>
      ((await panel.api('GET', `/v1/audit?targetType=volume&targetId=${listed.id}`)).body.items as { action: string; outcome: string; code: string | null }[]).map((r) => [r.action, r.outcome, r.code]).reverse();
    await waitFor(async () => (await trail()).length >= 5, { timeoutMs: 5_000, message: 'audit rows' });
    expect(await trail()).toEqual([
      ['volume.delete', 'refused', 'NOT_FOUND'],
      ['volume.delete', 'refused', 'VOLUME_IN_USE'],
      ['volume.delete', 'refused', 'NODE_UNREACHABLE'],
      ['volume.delete', 'success', null],
      ['volume.delete', 'refused', 'NOT_FOUND'],
    ]);
  }, 90_000);

  describe.skipIf(!daemonSupport.available)('on a private second dockerd', () => {
    it('a host reboot (the engine restarted) keeps the volume\'s file and the service comes back with it; a removal taken while Docker was down survives an agent restart', async () => {
      const daemon = secondDaemon(`vol-${process.pid}`);
      cleanups.push(() => daemon.destroy());
      await daemon.start();
      await daemon.loadImages([image]);
      const env = { DOCKER_HOST: daemon.dockerHost };
      const n = await node('reboot', env);
      const svc = await panel.api('POST', '/v1/services', { teamId, name: 'rebooted', image, node: n.name, internalPort: 8080, command: WRITER, volumes: [{ name: 'data', mountPath: '/data' }] });
      const serviceId = svc.body.id as string;
      await deployRunning(serviceId);
      const dockerName = `tether-${serviceId}-data`;
      const inspect = JSON.parse((await dockerApi('GET', `/volumes/${dockerName}`, undefined, undefined, daemon.socket)).body) as { Mountpoint: string };
      const boots = path.join(inspect.Mountpoint, 'boots');
      expect(readFileSync(boots, 'utf8')).toBe('start\n');
      const status = async () => (await panel.api('GET', `/v1/services/${serviceId}/status`)).body as { state: string; containers: { containerId: string; state: string }[] };

      // The reboot: the engine stops (its containers with it) and starts again; the agent starts the service again.
      await daemon.stop();
      await daemon.start();
      await waitFor(async () => (await status()).state === 'running', { timeoutMs: 20_000, intervalMs: 100, message: 'service running after the engine restart' });
      const [container] = (await status()).containers;
      const mounts = (JSON.parse((await dockerApi('GET', `/containers/${container!.containerId}/json`, undefined, undefined, daemon.socket)).body) as { Mounts: { Name: string; Destination: string }[] }).Mounts;
      expect(mounts).toEqual([expect.objectContaining({ Name: dockerName, Destination: '/data' })]);
      // The file from before the reboot is there, and the container that came back started on it.
      expect(readFileSync(boots, 'utf8')).toBe('start\nstart\n');
      expect(readFileSync(path.join(inspect.Mountpoint, 'blob')).length).toBe(BLOB_BYTES);

      // Kept, then removed while Docker is down: the agent records the removal, ACKs, and cannot do it yet.
      expect((await panel.api('DELETE', `/v1/services/${serviceId}`)).status).toBe(204);
      const kept = await listedWhen(serviceId, (v) => v.kept, 'listed as kept');
      await daemon.stop();
      expect((await panel.api('DELETE', `/v1/volumes/${kept.id}`)).status).toBe(202);
      const pendingFile = path.join(n.agent.stateDir, 'volume-removals.json');
      expect(JSON.parse(readFileSync(pendingFile, 'utf8'))).toEqual({ version: 1, removals: [{ serviceId, names: ['data'] }] });

      // The agent restarts before Docker is back; the engine comes back; the removal is carried out from the file.
      const stateDir = n.agent.stateDir;
      await n.agent.stop();
      agents.splice(agents.indexOf(n.agent), 1);
      await daemon.start();
      expect((await dockerApi('GET', `/volumes/${dockerName}`, undefined, undefined, daemon.socket)).status).toBe(200);
      await startAgent(n.name, n.token, { stateDir, env });
      await waitFor(async () => (await dockerApi('GET', `/volumes/${dockerName}`, undefined, undefined, daemon.socket)).status === 404, { timeoutMs: 15_000, message: 'volume removed after the agent restart' });
      await waitFor(() => JSON.parse(readFileSync(pendingFile, 'utf8')).removals.length === 0, { timeoutMs: 5_000, message: 'pending removal done' });
      expect(existsSync(boots)).toBe(false);
      await waitFor(async () => (await volumesOf(serviceId)).length === 0, { timeoutMs: 10_000, message: 'volume unlisted' });
    }, 180_000);
  });
});
