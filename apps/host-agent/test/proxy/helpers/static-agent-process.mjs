// A stand-in for the agent process in the static proxy's survival test: the
// routing controller the agent runs for TETHER_PROXY=external (from the
// built dist/, the code the agent ships), applying one map and then idling
// with its loops running, so the test can SIGKILL, freeze and restart it.
import { pino } from 'pino';
import { routingHash } from '@tether/protocol';
import { createExternalRoutingController } from '../../../dist/proxy/index.js';

const o = JSON.parse(process.env.STATIC_AGENT_OPTIONS);
const controller = createExternalRoutingController({
  ...o,
  adminTimeoutMs: 5_000,
  checkIntervalMs: 1_000,
  logger: pino({ level: 'warn' }),
  endpoints: () => Promise.resolve(new Map()),
});
await controller.start();
const result = await controller.apply({ version: 1, hash: routingHash(o.routes), routes: o.routes });
if (result.error) throw new Error(result.error);
process.stdout.write(`static agent ready ${JSON.stringify(controller.answerer())}\n`);
setInterval(() => process.stdout.write(`answerer ${JSON.stringify(controller.answerer())}\n`), 250);
