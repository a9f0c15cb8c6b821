import http from 'node:http';
import { errorMessage, truncate } from '@tether/common';
import { FIELD_LIMITS, type ProbeEvidence } from '@tether/protocol';

// One HTTP health probe, made by the agent's own process (never inside the
// container, so an image without curl or wget is checked like any other).

/** Bytes of the body kept as evidence. */
export const PROBE_BODY_BYTES = 200;

export interface ProbeResult extends ProbeEvidence {
  /** 2xx or 3xx within the timeout. */
  ok: boolean;
}

/** Printable ASCII only: every other byte becomes `?` (the body is evidence, never markup or control codes). */
export function sanitiseProbeBody(bytes: Buffer): string {
  let out = '';
  for (const b of bytes.subarray(0, PROBE_BODY_BYTES)) out += b >= 0x20 && b <= 0x7e ? String.fromCharCode(b) : '?';
  return out;
}

/** GET http://host:port/path with one deadline for the whole exchange (connect, headers, first body bytes). */
export function probeHttp(host: string, port: number, path: string, timeoutMs: number): Promise<ProbeResult> {
  const startedAt = Date.now();
  const started = performance.now();
  return new Promise<ProbeResult>((resolve) => {
    let done = false;
    const chunks: Buffer[] = [];
    let kept = 0;
    let status: number | null = null;
    const finish = (error: string | null) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      request.destroy();
      const ok = error === null && status !== null && status >= 200 && status < 400;
      resolve({
        at: new Date(startedAt).toISOString(),
        status,
        error: error === null ? null : truncate(error, FIELD_LIMITS.text),
        latencyMs: Math.max(0, Math.round(performance.now() - started)),
        body: sanitiseProbeBody(Buffer.concat(chunks)),
        ok,
      });
    };
    const timer = setTimeout(() => finish(`no complete answer within ${timeoutMs} ms`), timeoutMs);
    // No keep-alive: a probe must not hold a connection in the container between probes.
    const request = http.get({ host, port, path, agent: false, headers: { 'user-agent': 'tether-health-check', accept: '*/*', connection: 'close' } }, (response) => {
      status = response.statusCode ?? null;
      response.on('data', (chunk: Buffer) => {
        if (kept < PROBE_BODY_BYTES) {
          chunks.push(chunk);
          kept += chunk.length;
        }
        if (kept >= PROBE_BODY_BYTES) finish(null);
      });
      response.on('end', () => finish(null));
      response.on('error', (err) => finish(status === null ? errorMessage(err) : null));
    });
    request.on('error', (err) => finish(errorMessage(err)));
  });
}

/** The evidence without the verdict, as the wire carries it. */
export const evidenceOf = ({ ok: _ok, ...evidence }: ProbeResult): ProbeEvidence => evidence;

/** One line naming every field of the evidence, for reasons and logs. */
export function describeProbe(p: ProbeEvidence): string {
  const answer = p.status === null ? 'no answer' : `status ${p.status}`;
  return `at ${p.at}, ${answer}${p.error ? `, error ${p.error}` : ''}, ${p.latencyMs} ms, body ${JSON.stringify(p.body)}`;
}
