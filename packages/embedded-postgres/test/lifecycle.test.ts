import net from 'node:net';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { spawnOwner, waitFor } from './fixtures/spawn.js';

// The server's lifetime belongs to the process that started it: a SIGTERM
// handler of the owner runs against a live database, and an owner that exits
// without stopping it does not leave an orphaned server behind.

const fixture = path.join(path.dirname(fileURLToPath(import.meta.url)), 'fixtures', 'owner.mjs');

const portOpen = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });

describe('embedded PostgreSQL lifecycle', () => {
  it("leaves SIGTERM to the owner: its handler still reaches the database", async () => {
    const owner = spawnOwner(fixture, 'graceful');
    const port = Number((await owner.waitForOutput(/ready on (\d+)/, 60_000))[1]);
    process.kill(owner.pid, 'SIGTERM');
    await owner.waitForOutput(/query after SIGTERM: ok/, 10_000);
    expect(await owner.exited()).toBe(0);
    expect(await portOpen(port)).toBe(false);
  });

  it('stops the server when the owner exits without stopping it', async () => {
    const owner = spawnOwner(fixture, 'abrupt');
    const port = Number((await owner.waitForOutput(/ready on (\d+)/, 60_000))[1]);
    expect(await portOpen(port)).toBe(true);
    await owner.exited();
    await waitFor(async () => !(await portOpen(port)), 10_000);
  });
});
