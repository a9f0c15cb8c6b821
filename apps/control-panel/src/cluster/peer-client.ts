import { Agent, request, type Dispatcher } from 'undici';
import { AppError } from '../errors.js';
import { checkLiveReportAnswer, type LiveReportAnswer } from '../sessions/live-report.js';
import type { PanelSecret } from './peer-credentials.js';

// This panel as a client of other panels' internal surface (/internal/v1):
// live session reports (one batched request per owner per read) and log
// streams. Every call is bounded: connecting and the answer's headers by the
// peer timeout, a live report's whole answer too; a log stream's body has no
// deadline (a follow on a quiet service is silent for as long as it likes)
// and is read only as fast as the customer takes it.

export interface Peer {
  panelId: string;
  internalUrl: string | null;
}

/** The largest live-report answer read (about 1 KiB per node with containers). */
const MAX_ANSWER_BYTES = 32 * 1024 * 1024;

export class PeerClient {
  private readonly agent: Agent;

  constructor(
    private readonly secret: PanelSecret,
    private readonly timeoutMs: number,
  ) {
    this.agent = new Agent({ connect: { timeout: timeoutMs }, headersTimeout: timeoutMs, bodyTimeout: 0, keepAliveTimeout: 30_000 });
  }

  /** The owner's live reports of these nodes; throws OWNER_PANEL_UNREACHABLE when it does not answer in time. */
  async liveReports(peer: Peer, nodeIds: readonly string[], containers: boolean): Promise<LiveReportAnswer> {
    const url = this.urlOf(peer, 'internal/v1/live-reports');
    const signal = AbortSignal.timeout(this.timeoutMs);
    let text: string;
    try {
      const res = await request(url, {
        dispatcher: this.agent,
        method: 'POST',
        headers: { authorization: this.secret.authorization, 'content-type': 'application/json' },
        body: JSON.stringify({ nodeIds, containers }),
        signal,
      });
      text = await readBounded(res.body, MAX_ANSWER_BYTES);
      if (res.statusCode !== 200) throw new Error(`answered HTTP ${res.statusCode}`);
    } catch (err) {
      throw unreachable(peer, signal.aborted ? `no answer within ${this.timeoutMs} ms` : describe(err), err);
    }
    let answer: unknown;
    try {
      answer = JSON.parse(text);
    } catch (err) {
      throw unreachable(peer, 'its answer is not JSON', err);
    }
    if (!checkLiveReportAnswer.Check(answer) || answer.panelId !== peer.panelId) throw unreachable(peer, 'its answer is not a live report of that panel');
    return answer;
  }

  /** Opens the owner's log stream of a service; resolves once its headers came (any status). */
  async openLogs(peer: Peer, serviceId: string, query: URLSearchParams, signal: AbortSignal): Promise<Dispatcher.ResponseData> {
    const url = this.urlOf(peer, `internal/v1/services/${encodeURIComponent(serviceId)}/logs?${query.toString()}`);
    try {
      return await request(url, { dispatcher: this.agent, method: 'GET', headers: { authorization: this.secret.authorization }, signal });
    } catch (err) {
      throw unreachable(peer, describe(err), err);
    }
  }

  async close(): Promise<void> {
    await this.agent.destroy().catch(() => {});
  }

  /** `path` is relative, so an internal URL with a path prefix (behind a proxy) keeps it. */
  private urlOf(peer: Peer, path: string): string {
    if (!peer.internalUrl) {
      throw new AppError('OWNER_PANEL_NO_INTERNAL_URL', `panel ${peer.panelId} holds the node's session but has no internal URL (TETHER_PANEL_INTERNAL_URL); ask that panel directly`);
    }
    return new URL(path, peer.internalUrl.endsWith('/') ? peer.internalUrl : `${peer.internalUrl}/`).toString();
  }
}

function unreachable(peer: Peer, why: string, cause?: unknown): AppError {
  return new AppError('OWNER_PANEL_UNREACHABLE', `panel ${peer.panelId}, which holds the node's session, could not be reached at its internal URL: ${why}`, undefined, { cause });
}

/** A short cause for the message: the error's code (ECONNREFUSED, UND_ERR_HEADERS_TIMEOUT, …), never a stack. */
function describe(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown };
  return typeof e?.code === 'string' ? e.code : typeof e?.message === 'string' ? e.message.slice(0, 200) : 'unknown error';
}

/** The body as text, refusing more than `max` bytes. */
export async function readBounded(body: AsyncIterable<Buffer>, max: number): Promise<string> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > max) throw new Error(`answer larger than ${max} bytes`);
    parts.push(chunk);
  }
  return Buffer.concat(parts).toString('utf8');
}
