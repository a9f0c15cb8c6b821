import { request, type ClientRequest } from 'node:http';

// Any long answer (server-sent events, NDJSON, a held ?wait=) read as it
// comes, on its own socket: a test sees what arrived and when the panel ended it.

export interface TextStream {
  /** 0 until the answer's head has come. */
  status: number;
  text: string;
  /** performance.now() when the panel ended the answer (or the socket closed). */
  ended: Promise<number>;
  endedAt: number | null;
  /** Leaves: closes the connection. */
  close(): void;
}

interface Started {
  stream: TextStream;
  head: Promise<void>;
}

function start(url: string, options: { method?: string; headers?: Record<string, string> }): Started {
  const req: ClientRequest = request(url, { method: options.method ?? 'GET', headers: options.headers ?? {}, agent: false });
  let settle!: (at: number) => void;
  const stream: TextStream = {
    status: 0,
    text: '',
    endedAt: null,
    ended: new Promise<number>((r) => (settle = r)),
    close: () => req.destroy(),
  };
  const done = () => {
    stream.endedAt ??= performance.now();
    settle(stream.endedAt);
  };
  const head = new Promise<void>((resolve, reject) => {
    req.on('error', (err) => {
      done();
      reject(err);
    });
    req.on('close', done);
    req.on('response', (res) => {
      stream.status = res.statusCode ?? 0;
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (stream.text += chunk));
      res.on('end', done);
      res.on('close', done);
      resolve();
    });
  });
  req.end();
  return { stream, head };
}

/** Resolves once the answer's head has come (its status known); the body goes on arriving. */
export async function openTextStream(url: string, options: { method?: string; headers?: Record<string, string> } = {}): Promise<TextStream> {
  const { stream, head } = start(url, options);
  await head;
  return stream;
}

/** A request whose answer comes only at its end (a ?wait=): returned at once, its status filled in when it answers. */
export function startHeldRequest(url: string, options: { method?: string; headers?: Record<string, string> } = {}): TextStream {
  const { stream, head } = start(url, options);
  head.catch(() => undefined);
  return stream;
}
