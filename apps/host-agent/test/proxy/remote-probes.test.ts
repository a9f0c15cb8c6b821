import net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { blackhole, ensureIptables, freePort, waitFor } from '@tether/testkit';
import { silentLogger } from '@tether/common';
import { RemoteProbes } from '../../src/proxy/remote-probes.js';

// The agent's own probe of other nodes' endpoints, with real sockets on loopback and short intervals: a new
// endpoint probed at once (passing until then), one failed connect makes it failing, one success passing again,
// each change heard once, and the bounds held both ways.

const INTERVAL_MS = 200;
const TIMEOUT_MS = 150;
/** Timer and event-loop slack on a busy 2-core machine. */
const SLACK_MS = 150;

async function listen(port = 0): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => (sockets.add(s), s.on('close', () => sockets.delete(s))));
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    close: () => new Promise<void>((resolve) => (server.close(() => resolve()), sockets.forEach((s) => s.destroy()))),
  };
}

describe('remote probes', () => {
  const made: RemoteProbes[] = [];
  const servers: { close(): Promise<void> }[] = [];
  afterEach(async () => {
    await Promise.all(made.splice(0).map((p) => p.stop()));
    await Promise.all(servers.splice(0).map((s) => s.close().catch(() => undefined)));
  });

  const probes = () => {
    const changes: number[] = [];
    const p = new RemoteProbes({ intervalMs: INTERVAL_MS, timeoutMs: TIMEOUT_MS, logger: silentLogger, onChange: () => changes.push(Date.now()) });
    made.push(p);
    return { p, changes };
  };

  it('a new endpoint is probed at once: a listener passes, a port nobody listens on fails after one connect', async () => {
    const up = await listen();
    servers.push(up);
    const nobody = await freePort();
    const { p, changes } = probes();
    p.start();
    const at = Date.now();
    p.track([`127.0.0.1:${up.port}`, `127.0.0.1:${nobody}`]);
    // Assumed passing until its first probe.
    expect(p.failingEndpoints.size).toBe(0);
    await waitFor(() => changes.length === 1, { timeoutMs: 2_000, intervalMs: 5, message: 'one change' });
    const ms = Date.now() - at;
    console.log(`remote probes: a refused endpoint failing ${ms} ms after it appeared (interval ${INTERVAL_MS} ms)`);
    // At once, not an interval later (a refused connect answers in well under a millisecond).
    expect(ms).toBeLessThan(INTERVAL_MS);
    expect([...p.failingEndpoints]).toEqual([`127.0.0.1:${nobody}`]);
    expect(p.stats.probes).toBe(2);
  });

  it('a server that accepted, then closed: failing at the next round, never before it; back: passing after one success', async () => {
    const first = await listen();
    const endpoint = `127.0.0.1:${first.port}`;
    const { p, changes } = probes();
    p.track([endpoint]);
    p.start();
    await waitFor(() => p.stats.rounds >= 1, { timeoutMs: 2_000, intervalMs: 2, message: 'first round' });
    expect(p.failingEndpoints.size).toBe(0);
    // Right after a round ended: the next one is an interval away.
    const rounds = p.stats.rounds;
    await waitFor(() => p.stats.rounds > rounds, { timeoutMs: 2_000, intervalMs: 2, message: 'second round' });
    await first.close();
    const closedAt = Date.now();
    await waitFor(() => p.failingEndpoints.has(endpoint), { timeoutMs: 3_000, intervalMs: 5, message: 'failing after the close' });
    const downMs = Date.now() - closedAt;
    expect(changes).toHaveLength(1);
    const again = await listen(first.port);
    servers.push(again);
    const backAt = Date.now();
    await waitFor(() => !p.failingEndpoints.has(endpoint), { timeoutMs: 3_000, intervalMs: 5, message: 'passing again' });
    const upMs = Date.now() - backAt;
    console.log(`remote probes: closed → failing ${downMs} ms, listening again → passing ${upMs} ms (interval ${INTERVAL_MS} ms)`);
    expect(downMs).toBeGreaterThanOrEqual(INTERVAL_MS * 0.75);
    expect(downMs).toBeLessThan(INTERVAL_MS + TIMEOUT_MS + SLACK_MS);
    expect(upMs).toBeLessThan(INTERVAL_MS + TIMEOUT_MS + SLACK_MS);
    expect(changes).toHaveLength(2);
  });

  it('an endpoint that leaves the map is forgotten without a change; one that comes back is probed afresh', async () => {
    const nobody = `127.0.0.1:${await freePort()}`;
    const { p, changes } = probes();
    p.start();
    p.track([nobody]);
    await waitFor(() => p.failingEndpoints.has(nobody), { timeoutMs: 2_000, intervalMs: 5, message: 'failing' });
    p.track([]);
    expect(p.failingEndpoints.size).toBe(0);
    expect(changes).toHaveLength(1);
    const before = p.stats.probes;
    p.track([nobody]);
    expect(p.failingEndpoints.size).toBe(0);
    await waitFor(() => p.failingEndpoints.has(nobody), { timeoutMs: 2_000, intervalMs: 5, message: 'failing again' });
    expect(p.stats.probes).toBe(before + 1);
  });
});

const iptables = await ensureIptables();

describe.skipIf(!iptables.available)('remote probes: an endpoint that never answers', () => {
  it('a listener whose SYNs are dropped (no RST, no SYN-ACK) fails after the timeout, not before', async () => {
    const silent = await listen();
    const hole = blackhole(silent.port);
    const failedAt: number[] = [];
    const p = new RemoteProbes({ intervalMs: 5_000, timeoutMs: TIMEOUT_MS, logger: silentLogger, onChange: () => failedAt.push(Date.now()) });
    try {
      p.start();
      const at = Date.now();
      p.track([`127.0.0.1:${silent.port}`]);
      await waitFor(() => failedAt.length === 1, { timeoutMs: 3_000, intervalMs: 2, message: 'failing after the timeout' });
      const ms = failedAt[0]! - at;
      console.log(`remote probes: a silent endpoint failing after ${ms} ms (timeout ${TIMEOUT_MS} ms)`);
      expect(ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 5);
      expect(ms).toBeLessThan(TIMEOUT_MS + SLACK_MS);
    } finally {
      hole.release();
      await p.stop();
      await silent.close();
    }
  });
});
