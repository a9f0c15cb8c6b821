// Reads a GET /v1/services/:id/logs answer (NDJSON) as it streams, for tests.

export interface LogRecord {
  type: 'log' | 'notice' | 'end';
  replica?: string;
  containerId?: string;
  stream?: 'stdout' | 'stderr';
  time?: string;
  text?: string;
  code?: string;
  reason?: string;
}

export interface LogReader {
  status: number;
  records: LogRecord[];
  /** Log records only. */
  logs(): LogRecord[];
  /** Resolves with the end record, or null when the body ended without one (or was aborted). */
  done: Promise<LogRecord | null>;
  close(): void;
}

export async function readLogs(url: string, token: string): Promise<LogReader> {
  const controller = new AbortController();
  const res = await fetch(url, { headers: { authorization: `Bearer ${token}` }, signal: controller.signal });
  const records: LogRecord[] = [];
  const done = (async () => {
    if (!res.body) return null;
    const decoder = new TextDecoder();
    let pending = '';
    try {
      for await (const chunk of res.body) {
        pending += decoder.decode(chunk as Uint8Array, { stream: true });
        let newline = pending.indexOf('\n');
        while (newline !== -1) {
          const record = JSON.parse(pending.slice(0, newline)) as LogRecord;
          records.push(record);
          pending = pending.slice(newline + 1);
          if (record.type === 'end') return record;
          newline = pending.indexOf('\n');
        }
      }
    } catch {
      /* aborted */
    }
    return null;
  })();
  return {
    status: res.status,
    records,
    logs: () => records.filter((r) => r.type === 'log'),
    done,
    close: () => controller.abort(),
  };
}
