// A stand-in for the agent process in static-container.test.ts: the routing
// controller the agent runs for TETHER_PROXY=container (from the built
// dist/, the code the agent ships), applying one map and then idling with its loops running, so the
// test can SIGKILL, freeze and restart it.
import Docker from 'dockerode';
import { pino } from 'pino';
import { routingHash } from '@tether/protocol';
import { createContainerRoutingController, dockerEndpoints } from '../../../dist/proxy/index.js';

const o = JSON.parse(process.env.STATIC_AGENT_OPTIONS);
const docker = new Docker();
const { controller } = createContainerRoutingController({
  ...o,
  docker,
  logger: pino({ level: 'warn' }),
  endpoints: dockerEndpoints(docker, { network: o.network, node: o.node }),
});
await controller.start();
const result = await controller.apply({ version: 1, hash: routingHash(o.routes), routes: o.routes });
if (result.error) throw new Error(result.error);
process.stdout.write(`static agent ready ${JSON.stringify(controller.answerer())}\n`);
setInterval(() => process.stdout.write(`answerer ${JSON.stringify(controller.answerer())}\n`), 250);
