import { request } from 'node:http';

// Reads a GET /v1/services/:id/logs answer (NDJSON) as it streams, for tests.
// node:http on its own socket (no pool): closing a reader closes its
// connection, as a user's terminal going away does.

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
  /** Resolves with the end record, or null when the body ended without one (or the reader was closed). */
  done: Promise<LogRecord | null>;
  /** Stops reading without closing (a client that stops reading). */
  pause(): void;
  /** Reads again after pause(). */
  resume(): void;
  close(): void;
}

export interface LogReader {
  /** Bytes of log text received (counted also when records are not kept). */
  textBytes: number;
}

/** `keep: false`: count only (a load test must not hold what it reads). */
export function readLogs(url: string, token: string, options: { keep?: boolean } = {}): Promise<LogReader> {
  return new Promise((resolve, reject) => {
    const req = request(url, { headers: { authorization: `Bearer ${token}` }, agent: false });
    req.on('error', reject);
    req.on('response', (res) => {
      const records: LogRecord[] = [];
      let pending = '';
      const done = new Promise<LogRecord | null>((settle) => {
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          pending += chunk;
          let newline = pending.indexOf('\n');
          while (newline !== -1) {
            const record = JSON.parse(pending.slice(0, newline)) as LogRecord;
            if (record.type === 'log') reader.textBytes += record.text!.length;
            if (options.keep !== false || record.type !== 'log') records.push(record);
            pending = pending.slice(newline + 1);
            if (record.type === 'end') settle(record);
            newline = pending.indexOf('\n');
          }
        });
        res.on('close', () => settle(null));
        res.on('error', () => settle(null));
      });
      const reader: LogReader = {
        textBytes: 0,
        status: res.statusCode ?? 0,
        records,
        logs: () => records.filter((r) => r.type === 'log'),
        done,
        pause: () => res.pause(),
        resume: () => res.resume(),
        close: () => req.destroy(),
      };
      resolve(reader);
    });
    req.end();
  });
}
