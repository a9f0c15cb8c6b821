// Docker answers some calls with streams: newline-delimited JSON (pull
// progress, events) and multiplexed stdout/stderr frames (logs).

/**
 * Calls `onLine` with every JSON object of a newline-delimited stream.
 * Resolves when the stream ends; rejects when it fails or `onLine` throws
 * (the stream is then destroyed).
 */
export function parseJsonLines(stream: NodeJS.ReadableStream, onLine: (value: unknown) => void): Promise<void> {
  return new Promise((resolve, reject) => {
    let buffer = '';
    let done = false;
    const settle = (error: unknown) => {
      if (done) return;
      done = true;
      if (error === null) resolve();
      else {
        (stream as unknown as { destroy?: () => void }).destroy?.();
        reject(error);
      }
    };
    const take = (line: string) => {
      const text = line.trim();
      if (!text) return;
      let value: unknown;
      try {
        value = JSON.parse(text);
      } catch {
        return; // A partial or non-JSON line carries nothing we act on.
      }
      onLine(value);
    };
    stream.on('data', (chunk: Buffer | string) => {
      if (done) return;
      buffer += chunk.toString();
      let newline: number;
      try {
        while ((newline = buffer.indexOf('\n')) >= 0) {
          take(buffer.slice(0, newline));
          buffer = buffer.slice(newline + 1);
        }
      } catch (err) {
        settle(err);
      }
    });
    stream.on('error', (err) => settle(err));
    stream.on('end', () => {
      try {
        take(buffer);
        settle(null);
      } catch (err) {
        settle(err);
      }
    });
    // 'close' without 'end' means the connection was cut mid-stream.
    stream.on('close', () => settle(done ? null : new Error('stream closed before its end')));
  });
}

/** Log output of a container without a TTY: 8-byte frame headers (stream, 0, 0, 0, size) before each chunk. */
export function demuxLogs(raw: Buffer): string {
  const parts: Buffer[] = [];
  let offset = 0;
  while (offset + 8 <= raw.length) {
    const kind = raw[offset];
    const size = raw.readUInt32BE(offset + 4);
    if ((kind !== 0 && kind !== 1 && kind !== 2) || raw[offset + 1] !== 0 || offset + 8 + size > raw.length) {
      // Not multiplexed (a TTY container): the bytes are the output itself.
      return raw.toString('utf8');
    }
    parts.push(raw.subarray(offset + 8, offset + 8 + size));
    offset += 8 + size;
  }
  return offset === raw.length ? Buffer.concat(parts).toString('utf8') : raw.toString('utf8');
}
