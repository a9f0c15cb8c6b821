import { parseArgs } from 'node:util';
import { errorCode, errorMessage } from '@tether/common';
import { audit } from './commands/audit.js';
import { deploy } from './commands/deploy.js';
import { login } from './commands/login.js';
import { logs } from './commands/logs.js';
import { rollback } from './commands/rollback.js';
import { nodes } from './commands/nodes.js';
import { registries } from './commands/registries.js';
import { routes } from './commands/routes.js';
import { services } from './commands/services.js';
import { status } from './commands/status.js';
import { volumes } from './commands/volumes.js';
import { clientFor, type Context } from './context.js';
import { readCliEnv } from './env.js';
import { CliError, EXIT } from './errors.js';
import { createOutput } from './output.js';
import type { ApiClient } from './api-client.js';

export const HELP = `tether: deploy and watch services on a Tether panel

usage: tether <command> [options]

  login <url>                         store the panel URL and an API token (from stdin, or a prompt)
  services                            the services you can see
  deploy <service> [--image IMG] [--wait | --wait-drain] [--timeout S]
         [--command ARG]... [--arg ARG]... [--cpus N] [--memory MIB] [--volume NAME:/PATH[:ro]]...
         [--drain-seconds N] [--max-surge N] [--max-unavailable N] [--progress-deadline S]
                                      deploy (optionally changing the image, command, args, limits,
                                      volumes, drain, rollout first); --wait follows it until final (running),
                                      --wait-drain also until the old containers' drain ended
  rollback <service> [--to DEPLOYMENT] [--wait | --wait-drain] [--timeout S]
                                      deploy the spec of the newest earlier deployment that ran (or
                                      of --to) and keep it as the service's spec
  logs <service> [-f] [--tail N] [--since T] [--timestamps]
                                      container output; -f follows until Ctrl-C
  status [service]                    desired vs running replicas, with the live session's evidence
  routes [add <domain> <service> [--path P] | rm <domain|id>]
  volumes [--kept] | volumes rm <id|docker name>
                                      named volumes with their size on disk; rm deletes a kept one (its data)
  registries [add <host> --username U | rm <host|id>]
                                      your team's private registries; add reads the password from
                                      stdin or a prompt, and replaces the credentials of a known host
  node [ls | cordon <name> | evacuate <name> | uncordon <name> | label <name> KEY=VALUE... KEY-...
        | lost <name> --confirm]
                                      nodes (operators); cordon stops new placements and moves
                                      nothing; evacuate cordons and moves its replicas away one at
                                      a time (says what stays and why); uncordon ends both;
                                      label merges (KEY- removes); lost says the host is gone:
                                      decommissions it and moves its services elsewhere, stateful
                                      ones on EMPTY volumes (restore from your backup)
  audit [--since T] [--actor ID] [--action A] [--outcome O] [--target TYPE[/ID]] [--tail N]
                                      who changed what, newest first (your team's rows; an operator's: all)

options: --json (machine output), -h/--help
exit codes: 0 ok, 1 deployment failed, 2 usage, 3 node unreachable,
            4 authentication or API error, 5 wait ended before the deployment was final (or drained)
`;

const OPTIONS = {
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  image: { type: 'string' },
  command: { type: 'string', multiple: true },
  arg: { type: 'string', multiple: true },
  cpus: { type: 'string' },
  memory: { type: 'string' },
  volume: { type: 'string', multiple: true },
  wait: { type: 'boolean' },
  'wait-drain': { type: 'boolean' },
  'drain-seconds': { type: 'string' },
  'max-surge': { type: 'string' },
  'max-unavailable': { type: 'string' },
  'progress-deadline': { type: 'string' },
  timeout: { type: 'string' },
  to: { type: 'string' },
  follow: { type: 'boolean', short: 'f' },
  tail: { type: 'string' },
  since: { type: 'string' },
  timestamps: { type: 'boolean', short: 't' },
  path: { type: 'string' },
  actor: { type: 'string' },
  action: { type: 'string' },
  outcome: { type: 'string' },
  target: { type: 'string' },
  kept: { type: 'boolean' },
  username: { type: 'string' },
  confirm: { type: 'boolean' },
} as const;

/** Runs the CLI; returns the exit code. Never throws. */
export async function main(argv: string[], io: { stdout?: NodeJS.WritableStream; stderr?: NodeJS.WritableStream } = {}): Promise<number> {
  const stderr = io.stderr ?? process.stderr;
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    stderr.write(`tether: ${errorMessage(err)}\n\n${HELP}`);
    return EXIT.USAGE;
  }
  const { values, positionals } = parsed;
  const [command, ...args] = positionals;
  if (values.help || command === undefined || command === 'help') {
    (io.stdout ?? process.stdout).write(HELP);
    return command === undefined && !values.help ? EXIT.USAGE : EXIT.OK;
  }
  const out = createOutput(values.json ?? false, io.stdout, stderr);
  const env = readCliEnv();
  const controller = new AbortController();
  // The first Ctrl-C ends what runs cleanly; a second one leaves at once.
  const onSignal = () => {
    if (controller.signal.aborted) process.exit(130);
    controller.abort();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  let client: ApiClient | undefined;
  const ctx: Context = {
    env,
    out,
    signal: controller.signal,
    stdin: process.stdin,
    client: () => (client ??= clientFor(env)),
  };
  try {
    switch (command) {
      case 'login':
        return await login(ctx, args);
      case 'services':
        return await services(ctx);
      case 'deploy':
        return await deploy(ctx, args, values);
      case 'rollback':
        return await rollback(ctx, args, values);
      case 'logs':
        return await logs(ctx, args, values);
      case 'status':
        return await status(ctx, args);
      case 'routes':
        return await routes(ctx, args, values);
      case 'registries':
        return await registries(ctx, args, values);
      case 'node':
      case 'nodes':
        return await nodes(ctx, args, values);
      case 'audit':
        return await audit(ctx, args, values);
      case 'volumes':
        return await volumes(ctx, args, values);
      default:
        stderr.write(`tether: unknown command ${command}\n\n${HELP}`);
        return EXIT.USAGE;
    }
  } catch (err) {
    if (err instanceof CliError) {
      out.data({ error: { code: err.apiCode ?? err.code, message: err.message } });
      stderr.write(`tether: ${err.message}\n`);
      return err.exitCode;
    }
    stderr.write(`tether: unexpected error${errorCode(err) ? ` ${errorCode(err)}` : ''}: ${errorMessage(err)}\n`);
    return EXIT.API_ERROR;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await client?.close().catch(() => undefined);
  }
}
