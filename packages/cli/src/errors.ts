import { CodedError, catalogCodes, defineErrorCatalog } from '@tether/common';

// Every way the CLI fails, with the exit code it ends with (docs/cli.md lists
// them). API errors keep the panel's code; this catalog adds the CLI's own.

/** Exit codes: the contract scripts rely on. */
export const EXIT = Object.freeze({
  OK: 0,
  DEPLOYMENT_FAILED: 1,
  USAGE: 2,
  NODE_UNREACHABLE: 3,
  API_ERROR: 4,
  WAIT_ENDED: 5,
});

export const CLI_ERRORS = defineErrorCatalog({
  USAGE: { exit: EXIT.USAGE, meaning: 'unknown command or option, or a missing argument' },
  NOT_LOGGED_IN: { exit: EXIT.API_ERROR, meaning: 'no panel URL and token: run `tether login <url>` (or set TETHER_URL and TETHER_TOKEN)' },
  PANEL_UNREACHABLE: { exit: EXIT.API_ERROR, meaning: 'the panel did not answer (connection refused, DNS, timeout)' },
  API_ERROR: { exit: EXIT.API_ERROR, meaning: 'the panel answered with an error (its code is printed)' },
  NODE_UNREACHABLE: { exit: EXIT.NODE_UNREACHABLE, meaning: "the service's (or volume's) node has no live session (or did not acknowledge in time)" },
  DEPLOYMENT_FAILED: { exit: EXIT.DEPLOYMENT_FAILED, meaning: 'the deployment ended failed (its reason is printed)' },
  WAIT_ENDED: { exit: EXIT.WAIT_ENDED, meaning: '--wait ended before the deployment was final' },
  STREAM_LOST: { exit: EXIT.API_ERROR, meaning: 'an event or log stream ended without saying why' },
  CONFIG_UNREADABLE: { exit: EXIT.API_ERROR, meaning: 'the stored credentials cannot be read or written' },
  VERSION_MISMATCH: { exit: EXIT.API_ERROR, meaning: "the panel's version does not fit this CLI's (or the server does not say one): install the panel's own CLI from <panel>/cli/tether-cli.tgz" },
});
export const CLI_CODES = catalogCodes(CLI_ERRORS);
export type CliCode = keyof typeof CLI_ERRORS;

/** Panel error codes that mean "the node cannot be reached now" (exit 3). */
const NODE_CODES = new Set(['NODE_UNREACHABLE', 'ACK_TIMEOUT']);

export class CliError extends CodedError<CliCode> {
  /** The panel's error code, when the panel answered with one. */
  readonly apiCode: string | undefined;
  constructor(code: CliCode, message: string, options: { apiCode?: string; cause?: unknown } = {}) {
    super(code, message, options);
    this.apiCode = options.apiCode;
  }
  get exitCode(): number {
    return CLI_ERRORS[this.code].exit;
  }
}

/** The CLI error for an API error answer. */
export function apiError(status: number, code: string | undefined, message: string): CliError {
  const apiCode = code ?? `HTTP_${status}`;
  return new CliError(NODE_CODES.has(apiCode) ? 'NODE_UNREACHABLE' : 'API_ERROR', `${apiCode}: ${message}`, { apiCode });
}

export const usage = (message: string) => new CliError('USAGE', message);
