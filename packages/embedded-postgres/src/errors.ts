// Why an embedded PostgreSQL could not start, as stable codes. Each message is
// one line naming the cause and the fix, so a launcher prints it as is (and
// exits 2) instead of a stack trace.

export const STARTUP_ERROR_CODES = [
  /** The TCP port is held by another process. */
  'PG_PORT_IN_USE',
  /** The file system of the data directory is (nearly) full. */
  'PG_DISK_FULL',
  /** The data directory belongs to another OS user than the one PostgreSQL runs as. */
  'PG_DATA_DIR_OWNER',
  /** Another PostgreSQL already runs on the data directory. */
  'PG_DATA_DIR_IN_USE',
  /** Anything else initdb or postgres said when they stopped; the message quotes it. */
  'PG_START_FAILED',
] as const;

export type StartupErrorCode = (typeof STARTUP_ERROR_CODES)[number];

export class EmbeddedPostgresError extends Error {
  constructor(
    readonly code: StartupErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'EmbeddedPostgresError';
  }
}

export function isEmbeddedPostgresError(err: unknown): err is EmbeddedPostgresError {
  return err instanceof EmbeddedPostgresError;
}

/** Reads what initdb or postgres printed before it stopped and names the cause when it is a known one. */
export function classifyServerOutput(output: string, context: { dataDir: string; port: number; runAs: string }): EmbeddedPostgresError {
  if (/Address already in use|could not create any TCP\/IP sockets/.test(output)) return portInUse(context.port);
  if (/No space left on device|could not extend file|disk full/i.test(output)) return diskFull(context.dataDir);
  const other = output.match(/Is another postmaster \(PID (\d+)\) running/);
  if (other) return dataDirInUse(context.dataDir, Number(other[1]));
  if (/has wrong ownership|Permission denied/.test(output)) return wrongOwner(context.dataDir, undefined, context.runAs);
  const last = output.trim().split('\n').filter((l) => l.trim()).slice(-3).join(' | ').replace(/\s+/g, ' ');
  return new EmbeddedPostgresError('PG_START_FAILED', `embedded PostgreSQL did not start (data in ${context.dataDir}): ${last || 'it exited without a message'}`);
}

export const portInUse = (port: number) =>
  new EmbeddedPostgresError('PG_PORT_IN_USE', `embedded PostgreSQL: port ${port} on 127.0.0.1 is taken by another process; stop that process or choose another port (0 picks a free one)`);

export const diskFull = (dataDir: string, freeBytes?: number) =>
  new EmbeddedPostgresError(
    'PG_DISK_FULL',
    `embedded PostgreSQL: the disk holding ${dataDir} is full${freeBytes !== undefined ? ` (${Math.floor(freeBytes / 1024 / 1024)} MiB free)` : ''}; free some space or choose a data directory on another disk`,
  );

export const wrongOwner = (dataDir: string, owner: string | undefined, runAs: string) =>
  new EmbeddedPostgresError(
    'PG_DATA_DIR_OWNER',
    `embedded PostgreSQL: the data directory ${dataDir} belongs to ${owner ?? 'another user'}, but PostgreSQL runs as ${runAs}; run as that user, \`chown -R ${runAs} ${dataDir}\`, or choose another data directory`,
  );

export const dataDirInUse = (dataDir: string, pid: number) =>
  new EmbeddedPostgresError('PG_DATA_DIR_IN_USE', `embedded PostgreSQL: another server (PID ${pid}) already runs on ${dataDir}, probably another panel started from the same folder; stop it or choose another data directory`);
