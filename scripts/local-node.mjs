#!/usr/bin/env node
// `npm run node [-- stop|start NAME]`: one agent of the local fleet that
// `npm start -- --nodes N` runs (start-local.mjs). Without arguments it lists
// the fleet's agents and their pids. `stop` sends the agent SIGTERM (its
// containers keep running, as when a host's agent dies: the panel closes its
// session, and after TETHER_RESCHEDULE_AFTER_MS its replicas start elsewhere);
// `start` asks the running launcher (SIGUSR2) to start it again.
import { writeFileSync } from 'node:fs';
import { isOurs, readRunning } from './local-common.mjs';
import { startRequestFile } from './local-agents.mjs';
import { recordedFleetSize } from './local-fleet.mjs';

const USAGE = 'usage: npm run node [-- stop NAME | start NAME]   (NAME: local-1 … local-N of `npm start -- --nodes N`)';
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function fail(message, code = 1) {
  console.error(`✖ ${message}`);
  process.exit(code);
}

const [command, name, ...rest] = process.argv.slice(2);
if (command === '-h' || command === '--help') {
  console.log(USAGE);
  process.exit(0);
}
if ((command !== undefined && !['stop', 'start'].includes(command)) || (command && !name) || rest.length > 0) fail(USAGE, 2);

const running = readRunning();
if (!running || !isOurs(running.launcher)) fail('nothing runs from this folder: `npm start -- --nodes 3` starts a local fleet');
if (!running.agents) fail(`this start runs one agent (node "local"), not a fleet: stop it with Ctrl-C, then \`npm run reset\` and \`npm start -- --nodes 3\``);
const names = Object.keys(running.agents);
const alive = (pid) => Number.isInteger(pid) && isOurs(pid);

if (command === undefined) {
  console.log(`local fleet of ${recordedFleetSize()} node(s), launcher pid ${running.launcher}:`);
  for (const n of names) console.log(`  ${n.padEnd(8)} ${alive(running.agents[n]) ? `running, pid ${running.agents[n]}` : 'stopped'}`);
  process.exit(0);
}
if (!names.includes(name)) fail(`no node "${name}" in this fleet (${names.join(', ')})`, 2);

if (command === 'stop') {
  const pid = running.agents[name];
  if (!alive(pid)) fail(`the agent of node ${name} is not running`);
  process.kill(pid, 'SIGTERM');
  for (let i = 0; i < 100 && alive(pid); i++) await sleep(100);
  if (alive(pid)) fail(`the agent of node ${name} (pid ${pid}) did not stop within 10 s`);
  console.log(`stopped the agent of node ${name} (pid ${pid}); its replicas move to another node after the grace the start printed`);
} else {
  if (alive(running.agents[name])) fail(`the agent of node ${name} runs already (pid ${running.agents[name]})`);
  writeFileSync(startRequestFile, `${name}\n`);
  process.kill(running.launcher, 'SIGUSR2');
  for (let i = 0; i < 50; i++) {
    await sleep(100);
    const pid = readRunning()?.agents?.[name];
    if (alive(pid)) {
      console.log(`started the agent of node ${name} again (pid ${pid}); it reconnects, and a copy that was replaced meanwhile is stopped`);
      process.exit(0);
    }
  }
  fail(`the launcher (pid ${running.launcher}) did not start node ${name} within 5 s; see its output`);
}
