import { readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';

// The agent serves no HTTP, so its container HEALTHCHECK reads a file the
// agent rewrites every few seconds (health.json in the state folder): a fresh
// file proves the event loop runs. The session state is in it for whoever
// looks, but does not count: a panel that is down must not make every agent
// unhealthy (the agent's own backoff already handles that).

export const HEALTH_FILE = 'health.json';
export const HEALTH_WRITE_INTERVAL_MS = 5_000;
/** Older than this, the agent counts as hung. */
export const HEALTH_STALE_MS = 30_000;

export interface HealthRecord {
  at: number;
  pid: number;
  connection: string;
  sessionId: string | null;
}

/** Writes the health file now and every `intervalMs`; returns a stop function. */
export function startHealthFile(stateDir: string, read: () => Omit<HealthRecord, 'at' | 'pid'>, intervalMs = HEALTH_WRITE_INTERVAL_MS): () => void {
  const file = path.join(stateDir, HEALTH_FILE);
  const write = async () => {
    const record: HealthRecord = { at: Date.now(), pid: process.pid, ...read() };
    // Atomic: the check never reads half a file.
    await writeFile(`${file}.tmp`, JSON.stringify(record));
    await rename(`${file}.tmp`, file);
  };
  const tick = () => void write().catch(() => undefined);
  tick();
  const timer = setInterval(tick, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

/** Exit status of the HEALTHCHECK: 0 when the file is fresh, 1 with a reason otherwise. */
export async function checkHealthFile(stateDir: string, now = Date.now(), staleMs = HEALTH_STALE_MS): Promise<{ ok: boolean; reason: string }> {
  let record: HealthRecord;
  try {
    record = JSON.parse(await readFile(path.join(stateDir, HEALTH_FILE), 'utf8')) as HealthRecord;
  } catch (err) {
    return { ok: false, reason: `no readable ${HEALTH_FILE} in ${stateDir}: ${(err as Error).message}` };
  }
  const age = now - record.at;
  if (!(age <= staleMs)) return { ok: false, reason: `${HEALTH_FILE} is ${age} ms old (limit ${staleMs} ms): the agent is hung or stopped` };
  return { ok: true, reason: `alive ${age} ms ago, connection ${record.connection}` };
}
