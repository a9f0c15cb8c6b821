import type Docker from 'dockerode';
import { TEST_IMAGE } from '@tether/testkit';
import { LABELS } from '../../../src/docker/docker-client.js';

// Container-mode proxy tests: a service container the agent's endpoint
// reader finds by its labels, and the cleanup of what a test run made.

/** Busybox httpd on `network` answering `hello from <service>`, labelled as service `service` of node `run`. */
export async function startServiceContainer(docker: Docker, o: { network: string; run: string; service: string }): Promise<void> {
  const web = await docker.createContainer({
    Image: TEST_IMAGE,
    Labels: { 'tether.test': o.run, [LABELS.managed]: 'true', [LABELS.service]: o.service, [LABELS.node]: o.run },
    Cmd: ['sh', '-c', `mkdir -p /www && echo hello from ${o.service} > /www/index.html && exec httpd -f -p 8080 -h /www`],
    NetworkingConfig: { EndpointsConfig: { [o.network]: {} } },
  });
  await web.start();
}

/** Removes every container labelled `tether.test=<run>`, then the network. */
export async function removeRun(docker: Docker, run: string, network: string): Promise<void> {
  const leftovers = await docker.listContainers({ all: true, filters: { label: [`tether.test=${run}`] } });
  await Promise.all(leftovers.map((c) => docker.getContainer(c.Id).remove({ force: true })));
  await docker.getNetwork(network).remove().catch(() => undefined);
}
