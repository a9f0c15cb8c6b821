import http from 'node:http';
import type { Logger } from '@tether/common';
import WebSocket from 'ws';
import type { CanaryStatus } from '@tether/protocol';
import type { NewJournalEvent } from '../proxy/event-journal.js';
import { CANARY_HOST } from '../proxy/render.js';
import type { ReloadRecord } from '../proxy/configurator.js';
import { attributeDrop } from './attribution.js';
import { CANARY_PROBE_PATH, CANARY_SECRET_HEADER, CANARY_SOCKET_PATH } from './canary-endpoint.js';
import type { CanaryStateStore } from './canary-state.js';

// The canary: one long-lived WebSocket through the agent's own Caddy to the
// agent's own endpoint, like a customer's, plus an HTTP request every
// interval. A close the agent did not ask for is a drop: counted with its
// close code, the time until the canary was through again, and the cause the
// agent can name (attribution.ts). The verdict waits settleMs after the drop,
// because the reload that caused it is reported only once Caddy answered the
// load, after Caddy already closed the connection.

export interface CanaryMonitorOptions {
  /** http://host:port of Caddy's canary server, as the agent reaches it (null: not known now, e.g. no proxy container). */
  proxyUrl: string | (() => Promise<string | null>);
  secret: string;
  /** HTTP probe (and WebSocket liveness echo) every intervalMs. */
  intervalMs: number;
  state: CanaryStateStore;
  /** Each drop, once, for the panel's history (the event journal). */
  onDrop: (event: NewJournalEvent) => void;
  logger: Logger;
  now?: () => Date;
  /** Bound of a probe, an echo and a connect; default min(intervalMs, 5 s). */
  probeTimeoutMs?: number;
  /** Delay between reconnect attempts after a drop; default min(intervalMs, 250 ms). */
  retryMs?: number;
  /** How long after a drop the cause is decided at the earliest; default 2 s. */
  settleMs?: number;
  /** A drop not recovered by then is recorded without a reconnect time; default 60 s. */
  maxPendingMs?: number;
}

interface PendingDrop {
  at: number;
  /** When the dropped connection had opened. */
  openedAt: number;
  closeCode: number | null;
  reconnectedAt: number | null;
  unreachableAttempts: number;
}

/** Reloads remembered for attribution: enough for any drop still pending. */
const RELOAD_MEMORY_MS = 10 * 60_000;

export class CanaryMonitor {
  private socket: WebSocket | null = null;
  private open = false;
  /** When the current (or last) canary connection opened. */
  private openedAt = 0;
  private stopped = true;
  private drop: PendingDrop | null = null;
  private reloads: ReloadRecord[] = [];
  private probeTimer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private finalizeTimer: NodeJS.Timeout | undefined;
  private echoTimer: NodeJS.Timeout | undefined;
  private readonly now: () => Date;
  private readonly probeTimeoutMs: number;
  private readonly retryMs: number;
  private readonly settleMs: number;
  private readonly maxPendingMs: number;
  /** Drops recorded since start (tests). */
  drops = 0;
  /** Failed connects in a row: the retry delay doubles with each, up to the interval. */
  private failedConnects = 0;
  /** The proxy's address is being looked up for a connect. */
  private connecting = false;

  constructor(private readonly options: CanaryMonitorOptions) {
    this.now = options.now ?? (() => new Date());
    this.probeTimeoutMs = options.probeTimeoutMs ?? Math.min(options.intervalMs, 5_000);
    this.retryMs = options.retryMs ?? Math.min(options.intervalMs, 250);
    this.settleMs = options.settleMs ?? 2_000;
    this.maxPendingMs = options.maxPendingMs ?? 60_000;
  }

  get connected(): boolean {
    return this.open;
  }

  status(): CanaryStatus {
    return this.options.state.status(this.open);
  }

  /** A reload the routing controller made: the evidence a drop is attributed with. */
  noteReload(reload: ReloadRecord): void {
    const cutoff = Date.now() - RELOAD_MEMORY_MS;
    this.reloads = [...this.reloads.filter((r) => r.at.getTime() >= cutoff), reload];
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.connect();
    const tick = () => {
      this.probeTimer = setTimeout(() => {
        void this.probe().finally(() => !this.stopped && tick());
      }, this.options.intervalMs);
    };
    tick();
  }

  /** The agent closes its own canary: not a drop. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const t of [this.probeTimer, this.retryTimer, this.finalizeTimer, this.echoTimer]) clearTimeout(t);
    const socket = this.socket;
    this.socket = null;
    this.open = false;
    if (socket && socket.readyState !== WebSocket.CLOSED) {
      const closed = new Promise((resolve) => socket.once('close', resolve));
      socket.terminate();
      await closed;
    }
  }

  private headers() {
    return { host: CANARY_HOST, [CANARY_SECRET_HEADER]: this.options.secret };
  }

  private async target(): Promise<string | null> {
    const { proxyUrl } = this.options;
    try {
      return typeof proxyUrl === 'string' ? proxyUrl : await proxyUrl();
    } catch {
      return null;
    }
  }

  private connect(): void {
    if (this.stopped || this.socket || this.connecting) return;
    this.connecting = true;
    void this.target().then((base) => {
      this.connecting = false;
      if (this.stopped || this.socket) return;
      if (base === null) {
        // No proxy to reach (its container is not running): nothing answers, as far as the canary can tell.
        if (this.drop) this.drop.unreachableAttempts += 1;
        this.failedConnects += 1;
        this.retryTimer = setTimeout(() => this.connect(), this.retryDelay(false));
        return;
      }
      this.open_(base);
    });
  }

  private retryDelay(afterDrop: boolean): number {
    // Quick retries right after a drop (the reconnect time is measured); a canary that stays down backs off.
    return afterDrop ? this.retryMs : Math.min(this.options.intervalMs, this.retryMs * 2 ** Math.min(this.failedConnects, 16));
  }

  private open_(base: string): void {
    const url = new URL(CANARY_SOCKET_PATH, base);
    url.protocol = 'ws:';
    const socket = new WebSocket(url, { headers: this.headers(), handshakeTimeout: this.probeTimeoutMs, perMessageDeflate: false });
    this.socket = socket;
    let opened = false;
    socket.on('open', () => {
      opened = true;
      this.open = true;
      this.openedAt = Date.now();
      this.failedConnects = 0;
      if (this.drop && this.drop.reconnectedAt === null) {
        this.drop.reconnectedAt = Date.now();
        this.scheduleFinalize();
      }
    });
    // Caddy answered, but not with the endpoint (502 while the agent's endpoint is away, 404 without the canary route).
    socket.on('unexpected-response', (_req, res) => {
      res.resume();
      socket.terminate();
    });
    socket.on('error', (error: Error & { code?: string }) => {
      // Nothing answered on the canary port: refused, reset, or the handshake timed out.
      if (!opened && this.drop && error.code !== undefined) this.drop.unreachableAttempts += 1;
      else if (!opened && this.drop && /timed out/i.test(error.message)) this.drop.unreachableAttempts += 1;
    });
    socket.on('close', (code: number) => {
      if (this.socket !== socket) return;
      this.socket = null;
      this.open = false;
      clearTimeout(this.echoTimer);
      if (this.stopped) return;
      if (opened) this.beginDrop(code);
      else this.failedConnects += 1;
      this.retryTimer = setTimeout(() => this.connect(), this.retryDelay(opened));
    });
  }

  private beginDrop(code: number): void {
    // A second drop before the first was decided: decide the first now, with what is known.
    if (this.drop) this.finalize();
    this.drop = { at: Date.now(), openedAt: this.openedAt, closeCode: code, reconnectedAt: null, unreachableAttempts: 0 };
    this.options.logger.warn({ closeCode: code }, 'canary connection through the proxy dropped');
    this.scheduleFinalize();
  }

  private scheduleFinalize(): void {
    const drop = this.drop;
    if (!drop) return;
    clearTimeout(this.finalizeTimer);
    const due = drop.reconnectedAt === null ? drop.at + this.maxPendingMs : Math.max(drop.at + this.settleMs, drop.reconnectedAt);
    this.finalizeTimer = setTimeout(() => this.finalize(), Math.max(0, due - Date.now()));
  }

  private finalize(): void {
    const drop = this.drop;
    if (!drop) return;
    this.drop = null;
    clearTimeout(this.finalizeTimer);
    const { cause, reloadReason } = attributeDrop({ at: drop.at, openedAt: drop.openedAt, reloads: this.reloads, unreachableAttempts: drop.unreachableAttempts });
    const at = new Date(drop.at);
    this.drops += 1;
    void this.options.state.recordDrop(at, cause, reloadReason);
    this.options.onDrop({
      event: 'canary.drop',
      at: at.toISOString(),
      cause,
      reloadReason: reloadReason === null ? null : reloadReason.slice(0, 4096),
      closeCode: drop.closeCode,
      reconnectMs: drop.reconnectedAt === null ? null : drop.reconnectedAt - drop.at,
    });
    this.options.logger.info({ cause, reloadReason, closeCode: drop.closeCode, reconnectMs: drop.reconnectedAt === null ? null : drop.reconnectedAt - drop.at }, 'canary drop recorded');
  }

  /** One HTTP request through the proxy, and an echo on the WebSocket (a frozen proxy answers neither). */
  private async probe(): Promise<void> {
    const socket = this.socket;
    if (socket && this.open) {
      const token = `canary ${Date.now()}`;
      const onMessage = (data: WebSocket.RawData) => {
        if (data.toString() === token) {
          clearTimeout(this.echoTimer);
          socket.off('message', onMessage);
        }
      };
      socket.on('message', onMessage);
      this.echoTimer = setTimeout(() => {
        socket.off('message', onMessage);
        // Silent past the bound: the connection is dead whatever TCP says.
        socket.terminate();
      }, this.probeTimeoutMs);
      socket.send(token);
    } else if (!socket && !this.stopped) {
      // connect() does nothing while a connect is under way or a socket exists.
      this.connect();
    }
    if (!(await this.httpProbe())) await this.options.state.recordHttpFailure();
  }

  private async httpProbe(): Promise<boolean> {
    const base = await this.target();
    if (base === null) return false;
    const url = new URL(CANARY_PROBE_PATH, base);
    return new Promise((resolve) => {
      const req = http.request(url, { headers: this.headers(), agent: false, timeout: this.probeTimeoutMs }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode === 200));
        res.on('error', () => resolve(false));
      });
      req.on('timeout', () => req.destroy(new Error('timed out')));
      req.on('error', () => resolve(false));
      req.end();
    });
  }
}
