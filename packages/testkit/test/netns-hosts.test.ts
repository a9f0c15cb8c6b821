import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createHostNetwork,
  dockerApi,
  ensureHostNetworkSupport,
  ensureWebImage,
  run,
  sleep,
  spawnIn,
  sweepStaleHostNetworks,
  waitFor,
  type Host,
  type HostNetwork,
  type NetnsClient,
} from '../src/index.js';

const support = await ensureHostNetworkSupport();

const namespaces = async () => (await run('ip', ['netns', 'list'])).split('\n').map((line) => line.split(' ')[0]).filter(Boolean);
const rootLinks = async () => run('ip', ['-o', 'link']);

// Runs in host A: upgrades, holds the connection for a while exchanging
// messages, half-closes, and expects the server's last words after that.
const HOLDER_SCRIPT = `
const socket = require('node:net').connect(Number(process.env.PORT), process.env.ADDRESS);
let text = '';
const sent = [];
socket.on('data', (d) => { text += d; });
socket.on('end', () => { console.log(JSON.stringify({ text, sent })); process.exit(0); });
socket.on('error', (e) => { console.log(JSON.stringify({ error: e.message, text })); process.exit(1); });
socket.write('GET /hold HTTP/1.1\\r\\nHost: panel\\r\\nConnection: Upgrade\\r\\nUpgrade: echo\\r\\n\\r\\n');
let n = 0;
const timer = setInterval(() => {
  if (++n > 4) { clearInterval(timer); socket.end(); return; }
  sent.push('ping ' + n + ';');
  socket.write('ping ' + n + ';');
}, 300);
`;

// Runs in host A: keeps an upgraded connection busy, a tick every 100 ms, and
// prints how many bytes the panel's beats have brought so far.
const TALKER_SCRIPT = `
const socket = require('node:net').connect(Number(process.env.PORT), process.env.ADDRESS);
let received = 0;
socket.on('data', (d) => { received += d.length; console.log('received ' + received); });
socket.on('error', (e) => { console.log('error ' + e.message); process.exit(1); });
socket.write('GET /talk HTTP/1.1\\r\\nHost: panel\\r\\nConnection: Upgrade\\r\\nUpgrade: talk\\r\\n\\r\\n');
setInterval(() => socket.write('tick;'), 100);
`;

describe.skipIf(!support.available)('host network: namespaces on a bridge, a dockerd each', () => {
  let network: HostNetwork;
  let a: Host;
  let b: Host;
  let fromA: NetnsClient;
  let fromB: NetnsClient;
  let panelUrl: URL;
  let macs: string[] = [];
  const upgrades: { url: string; received: string; ended: boolean }[] = [];

  const panel = http.createServer((req, res) => res.end(`panel ${req.headers.host} ${req.url} from ${req.socket.remoteAddress}`));
  panel.on('upgrade', (req, socket: net.Socket) => {
    const seen = { url: req.url ?? '', received: '', ended: false };
    upgrades.push(seen);
    socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n\r\n');
    socket.on('data', (d: Buffer) => {
      seen.received += d.toString();
      if (seen.url === '/hold') socket.write(d);
    });
    socket.on('error', () => undefined);
    // Answered only after the client's FIN: it arrives only if the pipe passes a half-close on as such.
    socket.on('end', () => {
      seen.ended = true;
      socket.end('bye');
    });
    if (seen.url === '/talk') {
      const beat = setInterval(() => socket.write('beat;'), 100);
      socket.on('close', () => clearInterval(beat));
    }
  });

  beforeAll(async () => {
    const web = await ensureWebImage();
    network = await createHostNetwork({ tag: 'kit', hosts: 2 });
    [a, b] = network.hosts as [Host, Host];
    await network.startDaemons([web]);
    await new Promise<void>((resolve) => panel.listen(0, '127.0.0.1', resolve));
    panelUrl = new URL(await network.exposePanel((panel.address() as net.AddressInfo).port));
    [fromA, fromB] = await Promise.all([network.client(a), network.client(b)]);
    const created = await dockerApi(
      'POST',
      '/containers/create',
      JSON.stringify({
        Image: web,
        Env: ['MESSAGE=served by A'],
        ExposedPorts: { '8080/tcp': {} },
        HostConfig: { PortBindings: { '8080/tcp': [{ HostIp: a.address, HostPort: '8080' }] } },
      }),
      'application/json',
      a.daemon!.socket,
    );
    expect(created.status).toBe(201);
    const { Id } = JSON.parse(created.body) as { Id: string };
    expect((await dockerApi('POST', `/containers/${Id}/start`, undefined, undefined, a.daemon!.socket)).status).toBe(204);
  });
  afterAll(async () => {
    await network?.destroy();
    panel.close();
  });

  it('puts every address and link inside the namespaces, none in the host namespace', async () => {
    for (const host of network.hosts) {
      expect((await network.exec(host, 'ip', ['-o', '-4', 'addr', 'show', 'eth0'])).stdout).toContain(`${host.address}/24`);
    }
    const hubLinks = (await network.exec(network.hub.netns, 'ip', ['-o', 'link'])).stdout;
    expect(hubLinks).toMatch(/ p1@/);
    expect(hubLinks).toMatch(/ p2@/);
    macs = [...hubLinks.matchAll(/link\/ether ([0-9a-f:]+)/g)].map((m) => m[1]!);
    for (const host of network.hosts) macs.push(...[...(await network.exec(host, 'ip', ['-o', 'link', 'show', 'eth0'])).stdout.matchAll(/link\/ether ([0-9a-f:]+)/g)].map((m) => m[1]!));
    expect(macs).toHaveLength(5);
    const root = await rootLinks();
    for (const mac of macs) expect(root).not.toContain(mac);
    expect(await run('ip', ['-o', 'addr'])).not.toContain(network.subnet.replace(/\.0\/24$/, '.'));
  });

  it('exposes the panel at the hub: every host gets an answer, and a held, upgraded connection passes both ways and half-closes', async () => {
    for (const client of [fromA, fromB]) {
      const res = await client.get({ address: panelUrl.hostname, port: Number(panelUrl.port), host: 'panel.test', path: '/hello', timeoutMs: 3_000 });
      expect(res).toMatchObject({ status: 200, body: 'panel panel.test /hello from 127.0.0.1', error: null });
    }
    const holder = spawnIn(a.netns, process.execPath, ['-e', HOLDER_SCRIPT], { env: { ADDRESS: panelUrl.hostname, PORT: panelUrl.port } });
    expect(await holder.exited()).toBe(0);
    const { text, sent } = JSON.parse(holder.output().trim()) as { text: string; sent: string[] };
    expect(sent).toHaveLength(4);
    expect(text).toMatch(/^HTTP\/1\.1 101 Switching Protocols\r\n/);
    expect(text.slice(text.indexOf('\r\n\r\n') + 4)).toBe(`${sent.join('')}bye`);
    expect(upgrades).toEqual([{ url: '/hold', received: sent.join(''), ended: true }]);
  });

  it("publishes a container on A's address; cut(A) makes B's requests time out (not refused), heal(A) brings them back", async () => {
    const web = { address: a.address, port: 8080, host: 'web.test', timeoutMs: 1_000 };
    const ok = await waitFor(async () => {
      const res = await fromB.get(web);
      return res.status === 200 ? res : undefined;
    }, { timeoutMs: 10_000, message: "A's container answering B" });
    expect(ok.body).toBe('served by A\n');
    // Published on A's address only, and a closed port is refused: what a cut must not look like.
    expect(await fromA.tcpConnect('127.0.0.1', 8080, 1_000)).toBe(false);
    expect((await fromB.get({ ...web, port: 8081 })).error).toBe('ECONNREFUSED');
    expect((await fromA.get({ address: b.address, port: 9, timeoutMs: 1_000 })).error).toBe('ECONNREFUSED');

    const talker = network.spawnIn(a, process.execPath, ['-e', TALKER_SCRIPT], { env: { ADDRESS: panelUrl.hostname, PORT: panelUrl.port } });
    const talk = await waitFor(() => upgrades.find((u) => u.url === '/talk' && u.received.includes('tick;tick;')));
    const heardByA = () => Number([...talker.output().matchAll(/received (\d+)/g)].at(-1)?.[1] ?? 0);
    await waitFor(() => heardByA() > 0);

    await network.cut(a);
    await sleep(100);
    const [fromPanel, toPanel] = [heardByA(), talk.received.length];
    const panelAt = { address: panelUrl.hostname, port: Number(panelUrl.port), timeoutMs: 1_000 };
    const [cutOff, closedPort, aToB, aToPanel, bToPanel] = await Promise.all([
      fromB.get(web),
      fromB.get({ ...web, port: 8081 }),
      fromA.get({ address: b.address, port: 9, timeoutMs: 1_000 }),
      fromA.get(panelAt),
      fromB.get(panelAt),
    ]);
    expect(cutOff).toMatchObject({ status: null, error: 'timeout' });
    expect(cutOff.ms).toBeGreaterThanOrEqual(950);
    expect(closedPort.error).toBe('timeout');
    expect(aToB.error).toBe('timeout');
    expect(aToPanel.error).toBe('timeout');
    // Only A is cut: B still reaches the panel.
    expect(bToPanel.status).toBe(200);
    // The held connection went silent both ways, without being reset.
    expect([heardByA(), talk.received.length]).toEqual([fromPanel, toPanel]);
    expect(talk.ended).toBe(false);

    await network.heal(a);
    expect(await fromB.get(web)).toMatchObject({ status: 200, body: 'served by A\n', error: null });
    expect((await fromA.get(panelAt)).status).toBe(200);
    // TCP retransmits: the same connection carries on.
    await waitFor(() => heardByA() > fromPanel && talk.received.length > toPanel, { timeoutMs: 15_000, message: 'the held connection carrying on' });
    expect(talker.output()).not.toMatch(/error/);
    await talker.stop();
  });

  it('sweeps the namespaces of dead test processes, with what runs in them, and leaves live ones', async () => {
    const gone = spawn('true');
    await new Promise((resolve) => gone.once('exit', resolve));
    const stale = `tth-kit-${gone.pid}-0-1`;
    await run('ip', ['netns', 'add', stale]);
    const sleeper = spawnIn(stale, 'sleep', ['600']);
    expect(await sweepStaleHostNetworks()).toContain(stale);
    expect(await sleeper.exited()).toBeNull();
    const left = await namespaces();
    expect(left).not.toContain(stale);
    expect(left).toContain(a.netns);
  });

  it('destroy() removes the namespaces, their links and the daemons', async () => {
    const names = [network.hub.netns, ...network.hosts.map((host) => host.netns)];
    const sockets = network.hosts.map((host) => host.daemon!.socket);
    expect(await namespaces()).toEqual(expect.arrayContaining(names));
    await network.destroy();
    await network.destroy();
    const left = await namespaces();
    for (const name of names) expect(left).not.toContain(name);
    const root = await rootLinks();
    for (const mac of macs) expect(root).not.toContain(mac);
    for (const socket of sockets) expect(existsSync(socket)).toBe(false);
  });
});
