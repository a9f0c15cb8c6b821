import { ensureDocker, waitFor } from '@tether/testkit';
import type { Workload } from '@tether/protocol';
import { describe, expect, it } from 'vitest';
import { LABELS } from '../../src/docker/docker-client.js';
import { volumeName } from '../../src/runtime/workload-spec.js';
import { useHarness, type RuntimeHarness } from './support/harness.js';

// Named volumes with real Docker: kept across redeploys and agent restarts, mounted read-only when asked,
// and a service with a writable one rolls out without overlap (stop, start, check; old started again on failure).

const docker = await ensureDocker();

/** Appends the deployment's MESSAGE to /data/history and serves the whole file (what every earlier deployment wrote). */
const APPEND_AND_SERVE = 'echo "$MESSAGE" >> /data/history && mkdir -p /tmp/w && cp /data/history /tmp/w/index.html && exec httpd -f -p 8080 -h /tmp/w';

interface DockerEvent {
  Type: string;
  Action: string;
  Actor: { ID: string };
}

async function containerEvents(h: RuntimeHarness, since: number): Promise<DockerEvent[]> {
  const stream = await h.docker.getEvents({ since, until: Math.ceil(Date.now() / 1000) + 1, filters: { type: ['container'], label: [`${LABELS.node}=${h.node}`] } });
  const chunks: Buffer[] = [];
  for await (const chunk of stream as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks).toString('utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as DockerEvent);
}

describe.skipIf(!docker.available)('runtime: named volumes', () => {
  const h = useHarness('volumes', { controllersPerTest: true });
  const service = `notes${process.pid}`;
  const version = (n: number, over: Partial<Workload> = {}) =>
    h.workload(service, `${service}-d${n}`, {
      env: { MESSAGE: `v${n}` },
      command: ['sh', '-c', APPEND_AND_SERVE],
      volumes: [{ name: 'data', mountPath: '/data', readOnly: false }],
      ...over,
    });
  const running = async () => (await h.containers()).filter((c) => c.labels[LABELS.service] === service && c.state === 'running');

  it('a file written to the volume survives three redeploys and an agent restart; each rollout stops the old container before the new one starts', async () => {
    let controller = h.controller();
    await controller.start();
    const since = Math.floor(Date.now() / 1000) - 1;
    expect(await controller.deploy(version(1))).toMatchObject({ status: 'running' });
    const retired: string[] = [];
    for (const n of [2, 3, 4]) {
      const [old] = await running();
      retired.push(old!.id);
      const outcome = await controller.deploy(version(n));
      expect(outcome).toMatchObject({ status: 'running', reason: expect.stringContaining('without overlap') });
    }
    // An agent restart: a new controller adopts the running container, and the next deploy still finds the data.
    await h.stopControllers();
    controller = h.controller();
    await controller.start();
    const [beforeRestartDeploy] = await running();
    retired.push(beforeRestartDeploy!.id);
    expect(await controller.deploy(version(5))).toMatchObject({ status: 'running' });
    const [now] = await running();
    expect(await h.httpGet(now!.id)).toBe(['v1', 'v2', 'v3', 'v4', 'v5'].join('\n'));

    // Docker's own event log: every old container died before the next one was even created.
    const events = await containerEvents(h, since);
    const index = (id: string, action: string) => events.findIndex((e) => e.Actor.ID === id && e.Action === action);
    const creates = events.filter((e) => e.Action === 'create').map((e) => e.Actor.ID);
    expect(creates).toHaveLength(5);
    retired.forEach((oldId, i) => {
      const died = index(oldId, 'die');
      expect(died).toBeGreaterThanOrEqual(0);
      expect(index(creates[i + 1]!, 'create')).toBeGreaterThan(died);
    });

    const volumes = await h.docker.listVolumes({ filters: { label: [`${LABELS.service}=${service}`] } });
    expect(volumes.Volumes.map((v) => [v.Name, v.Labels[LABELS.volume], v.Labels[LABELS.node]])).toEqual([[volumeName(service, 'data'), 'data', h.node]]);
  });

  it('a new deployment that fails its check: the old container is started again and serves the same data', async () => {
    const controller = h.controller();
    await controller.start();
    const [old] = await running();
    const outcome = await controller.deploy(version(6, { command: ['sh', '-c', 'echo "broken release" >&2; exit 3'] }));
    expect(outcome).toMatchObject({ status: 'failed', code: 'CONTAINER_EXITED', reason: expect.stringContaining('started again') });
    const [back] = await running();
    expect(back?.id).toBe(old!.id);
    // The old container's command ran again on start: it appended its own MESSAGE once more.
    const expected = ['v1', 'v2', 'v3', 'v4', 'v5', 'v5'].join('\n');
    // Started again, its process needs a moment to listen.
    await waitFor(async () => (await h.httpGet(back!.id).catch(() => '')) === expected, { timeoutMs: 5_000, message: 'old container serves again' });
  });

  it('a read-only mount refuses writes (EROFS); another service\'s volume of the same name is its own', async () => {
    const controller = h.controller();
    await controller.start();
    const reader = `reader${process.pid}`;
    // Another service cannot name the first one's volume: names are per service, so this is its own, empty volume.
    const probe = 'mkdir -p /tmp/w; { touch /ro/x 2>&1 || true; ls /ro | wc -l; } > /tmp/w/index.html; exec httpd -f -p 8080 -h /tmp/w';
    const w = h.workload(reader, `${reader}-d1`, { command: ['sh', '-c', probe], volumes: [{ name: 'data', mountPath: '/ro', readOnly: true }] });
    expect(await controller.deploy(w)).toMatchObject({ status: 'running' });
    const [c] = (await h.containers()).filter((x) => x.labels[LABELS.service] === reader);
    const info = await h.docker.getContainer(c!.id).inspect();
    expect(info.Mounts).toMatchObject([{ Type: 'volume', Name: volumeName(reader, 'data'), Destination: '/ro', RW: false }]);
    const answer = await h.httpGet(c!.id);
    expect(answer).toContain('Read-only file system');
    expect(answer.split('\n').at(-1)?.trim()).toBe('0');
  });
});
