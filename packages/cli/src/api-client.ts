import { Agent, request, type Dispatcher } from 'undici';
import { PANEL_VERSION_HEADER } from '@tether/common';
import { apiError, CliError } from './errors.js';
import type { Credentials } from './credentials.js';
import { CLI_VERSION, checkPanelVersion } from './version.js';

// The panel's REST API over undici. Error answers become CliErrors carrying
// the panel's code; a panel that does not answer is PANEL_UNREACHABLE; a panel
// whose version does not fit this CLI's is VERSION_MISMATCH (its first answer decides).

export interface ClientOptions {
  /** Connect and headers timeout for ordinary calls. */
  timeoutMs?: number;
}

export class ApiClient {
  private readonly base: string;
  private readonly dispatcher: Dispatcher;
  private versionChecked = false;

  constructor(
    private readonly credentials: Credentials,
    options: ClientOptions = {},
  ) {
    this.base = credentials.url.replace(/\/+$/, '');
    const timeout = options.timeoutMs ?? 30_000;
    // Streams (logs -f, deployment events) may be quiet for long: no body timeout.
    this.dispatcher = new Agent({ connectTimeout: timeout, headersTimeout: timeout, bodyTimeout: 0 });
  }

  get url(): string {
    return this.base;
  }

  /** A JSON call; returns the parsed body (null for 204) and the status. */
  async call<T = unknown>(method: Dispatcher.HttpMethod, path: string, body?: unknown): Promise<{ status: number; body: T }> {
    const res = await this.send(method, path, { body, accept: 'application/json' });
    const text = await res.body.text();
    const parsed = text ? parseJson(text) : null;
    if (res.statusCode >= 400) throw errorOf(res.statusCode, parsed, text);
    return { status: res.statusCode, body: parsed as T };
  }

  /** Opens a streaming GET; the caller reads `body` (SSE or NDJSON) and aborts with `signal`. */
  async stream(path: string, accept: string, signal: AbortSignal): Promise<Dispatcher.ResponseData> {
    const res = await this.send('GET', path, { accept, signal });
    if (res.statusCode >= 400) {
      const text = await res.body.text();
      throw errorOf(res.statusCode, parseJson(text), text);
    }
    return res;
  }

  async close(): Promise<void> {
    await this.dispatcher.close();
  }

  private async send(method: Dispatcher.HttpMethod, path: string, options: { body?: unknown; accept: string; signal?: AbortSignal }) {
    const headers: Record<string, string> = { authorization: `Bearer ${this.credentials.token}`, accept: options.accept, 'user-agent': `tether-cli/${CLI_VERSION}` };
    let payload: string | undefined;
    if (options.body !== undefined) {
      payload = JSON.stringify(options.body);
      headers['content-type'] = 'application/json';
    }
    let res: Dispatcher.ResponseData;
    try {
      res = await request(`${this.base}${path}`, { method, headers, body: payload, dispatcher: this.dispatcher, signal: options.signal });
    } catch (err) {
      if (options.signal?.aborted) throw err;
      throw new CliError('PANEL_UNREACHABLE', `cannot reach the panel at ${this.base}: ${(err as Error).message}`, { cause: err });
    }
    if (!this.versionChecked) {
      try {
        checkPanelVersion(this.base, res.headers[PANEL_VERSION_HEADER]);
      } catch (err) {
        await res.body.dump().catch(() => undefined);
        throw err;
      }
      this.versionChecked = true;
    }
    return res;
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

function errorOf(status: number, body: unknown, text: string): CliError {
  const error = (body as { error?: { code?: unknown; message?: unknown } } | null)?.error;
  const code = typeof error?.code === 'string' ? error.code : undefined;
  const message = typeof error?.message === 'string' ? error.message : text.slice(0, 200) || `HTTP ${status}`;
  return apiError(status, code, message);
}

/** Lines of a streamed body (split on \n, a trailing \r dropped), as they arrive. */
export async function* lines(body: AsyncIterable<Buffer | string>): AsyncGenerator<string> {
  let pending = '';
  const decoder = new TextDecoder();
  for await (const chunk of body) {
    pending += typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true });
    let newline = pending.indexOf('\n');
    while (newline !== -1) {
      yield pending.slice(0, newline).replace(/\r$/, '');
      pending = pending.slice(newline + 1);
      newline = pending.indexOf('\n');
    }
  }
  pending += decoder.decode();
  if (pending) yield pending;
}

export interface ServerSentEvent {
  event: string;
  data: string;
}

/** Server-sent events of a streamed body (comments skipped, multi-line data joined). */
export async function* serverSentEvents(body: AsyncIterable<Buffer | string>): AsyncGenerator<ServerSentEvent> {
  let event = 'message';
  let data: string[] = [];
  for await (const line of lines(body)) {
    if (line === '') {
      if (data.length > 0) yield { event, data: data.join('\n') };
      event = 'message';
      data = [];
    } else if (line.startsWith(':')) {
      continue;
    } else {
      const colon = line.indexOf(':');
      const field = colon === -1 ? line : line.slice(0, colon);
      const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
      if (field === 'event') event = value;
      else if (field === 'data') data.push(value);
    }
  }
}
