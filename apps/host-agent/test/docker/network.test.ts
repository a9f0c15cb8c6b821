import { afterAll, describe, expect, it } from 'vitest';
import { DOCKER_SOCKET, ensureDocker } from '@tether/testkit';
import { createDockerClient, ensureNetwork } from '../../src/docker/docker-client.js';

// Tether's network is ensured by the runtime and the proxy container at the same moment when an agent
// starts. Docker 20.10 can create two networks of one name when two creates race, and every later use of
// the name then fails as ambiguous: concurrent callers must share one creation.

const docker = await ensureDocker();
const name = `tether-net-race-${process.pid}`;

describe.skipIf(!docker.available)('ensureNetwork', () => {
  const client = createDockerClient(`unix://${DOCKER_SOCKET}`);
  afterAll(async () => {
    for (const n of await client.listNetworks({ filters: { name: [name] } })) await client.getNetwork(n.Id).remove();
  });

  it('ten concurrent callers on one client make exactly one network', async () => {
    await Promise.all(Array.from({ length: 10 }, () => ensureNetwork(client, name)));
    const found = (await client.listNetworks({ filters: { name: [name] } })).filter((n) => n.Name === name);
    expect(found).toHaveLength(1);
    // Asked again once it exists: still one.
    await ensureNetwork(client, name);
    expect((await client.listNetworks({ filters: { name: [name] } })).filter((n) => n.Name === name)).toHaveLength(1);
  });
});
