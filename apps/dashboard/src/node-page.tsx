import { useEffect, useState } from 'preact/hooks';
import { nodeDetail } from './api';
import { age, shortHash, time } from './format';
import type { Fleet } from './fleet-stream';
import { useTick } from './fleet-stream';
import { AllocationTable } from './allocation-table';
import { RouteTable } from './route-table';
import { navigate } from './router';
import type { FleetRow, NodeDetail } from './types';

// One node: its live row (from the stream), the session timeline with close
// reasons, its proxy reloads with reasons, its services with the evidence
// behind each status, its allocations (the replicas placed on it), and its
// routes with their health and certificates. The history is read again
// whenever the live row changes (route counts, placement, and its
// allocations' count and newest status included).

export function NodePage(props: { id: string; fleet: Fleet }) {
  const live = props.fleet.rows.get(props.id);
  const [detail, setDetail] = useState<NodeDetail | null>(null);
  const [error, setError] = useState<string | null>(null);
  const now = useTick() + props.fleet.offset;
  const row = live ?? detail?.row;
  const counts = live?.routes;
  const changeKey = live
    ? `${live.state}|${live.sessionId}|${live.reloadsToday}|${live.services.running}/${live.services.desired}/${live.services.unhealthy ?? 0}|${placementText(live)}|${live.allocations ? `${live.allocations.count}@${live.allocations.lastStatusAt}` : ''}|${counts ? `${counts.serving}/${counts.failing}/${counts.certificateErrors}` : ''}`
    : '';
  useEffect(() => {
    let cancelled = false;
    nodeDetail(props.id).then(
      (d) => !cancelled && (setDetail(d), setError(null)),
      (err: Error) => !cancelled && setError(err.message),
    );
    return () => {
      cancelled = true;
    };
  }, [props.id, changeKey]);

  useEffect(() => {
    document.title = `${row?.name ?? 'Node'} · Tether fleet`;
    return () => {
      document.title = 'Tether fleet';
    };
  }, [row?.name]);

  if (error && !row) return <p role="alert" class="error">{error}</p>;
  if (!row) return <p class="loading">Loading…</p>;
  return (
    <article aria-labelledby="node-title" class="node">
      <p>
        <a href="/dashboard" onClick={(e) => { e.preventDefault(); navigate('/dashboard'); }}>← All nodes</a>
      </p>
      <h2 id="node-title">
        {row.name} <span class={`state state-${row.state}`}>{row.state === 'reachable' ? '● reachable' : row.state === 'unreachable' ? '✕ unreachable' : row.state.replace('_', ' ')}</span>
      </h2>
      <dl class="facts">
        <dt>Why</dt>
        <dd>{row.state === 'unreachable' ? `${row.reason} since ${time(row.since)} (${row.reasonDetail ?? 'no detail'})` : '—'}</dd>
        <dt>Session</dt>
        <dd class="mono">{row.sessionId ?? '—'}</dd>
        <dt>Connected for</dt>
        <dd>{row.connectedSince === null ? '—' : age(now - row.connectedSince)}</dd>
        <dt>Last frame</dt>
        <dd>{row.lastFrameAt === null ? '—' : `${age(now - row.lastFrameAt)} ago (${time(row.lastFrameAt)})`}</dd>
        <dt>Heartbeat interval</dt>
        <dd>{row.heartbeatMs === null ? '—' : `${row.heartbeatMs / 1000} s`}</dd>
        <dt>Reloads today</dt>
        <dd>{row.reloadsToday}{row.lastReloadReason ? ` (last: ${row.lastReloadReason})` : ''}</dd>
        <dt>Services running / desired</dt>
        <dd>{row.services.running ?? '?'} / {row.services.desired}</dd>
        <dt>Replicas placed here</dt>
        <dd class="replicas">{row.allocations ? row.allocations.count : '—'}</dd>
        <dt>Missed ACKs, 24 h</dt>
        <dd>{row.missedAcks24h}</dd>
        <dt>Runtime</dt>
        <dd>{row.runtime === null ? '—' : row.runtime.available ? 'available' : `✕ unavailable: ${row.runtime.error ?? ''}`}</dd>
        <dt>Routing</dt>
        <dd class="mono">
          desired {shortHash(row.routing.desiredHash)}, applied {shortHash(row.routing.appliedHash)}
          {row.routing.drifting && <span class="flag drift"> ⚠ drifting</span>}
        </dd>
        <dt>Placement</dt>
        <dd class="placement">{placementText(row)}</dd>
        <dt>Labels</dt>
        <dd class="mono labels">{labelText(row.labels)}</dd>
      </dl>

      <h3 id="services-title">Services</h3>
      <table aria-labelledby="services-title">
        <thead>
          <tr><th scope="col">Service</th><th scope="col">Status</th><th scope="col">Running / desired</th><th scope="col">Evidence</th></tr>
        </thead>
        <tbody>
          {(detail?.services ?? []).map((s) => (
            <tr key={s.serviceId}>
              <th scope="row">{s.name}</th>
              <td class={`svc svc-${s.state}`}>{s.state}</td>
              <td>{s.runningReplicas ?? '?'} / {s.desiredReplicas}</td>
              <td>
                {s.reason}
                {s.evidence && <span class="muted"> (last frame {age(s.evidence.lastFrameAgeMs)} old, report {age(s.evidence.reportAgeMs)} old)</span>}
              </td>
            </tr>
          ))}
          {detail && detail.services.length === 0 && <tr><td colSpan={4}>No services on this node.</td></tr>}
        </tbody>
      </table>

      <AllocationTable detail={detail} now={now} />

      <RouteTable detail={detail} now={now} />

      <h3 id="timeline-title">Session timeline</h3>
      <table aria-labelledby="timeline-title">
        <thead>
          <tr><th scope="col">When</th><th scope="col">Event</th><th scope="col">Session</th><th scope="col">Reason</th></tr>
        </thead>
        <tbody>
          {(detail?.sessions ?? []).map((e, i) => (
            <tr key={`${e.sessionId}-${e.kind}-${i}`}>
              <td>{time(e.at)}</td>
              <td>{e.kind === 'opened' ? '▲ opened' : '▼ closed'}</td>
              <td class="mono">{e.sessionId}</td>
              <td>{e.reason ?? '—'}{e.closeCode !== null ? <span class="muted"> (code {e.closeCode})</span> : null}</td>
            </tr>
          ))}
          {detail && detail.sessions.length === 0 && <tr><td colSpan={4}>No sessions yet.</td></tr>}
        </tbody>
      </table>

      <h3 id="reloads-title">Proxy reloads</h3>
      <table aria-labelledby="reloads-title">
        <thead>
          <tr><th scope="col">When</th><th scope="col">Routing hash</th><th scope="col">Reason</th></tr>
        </thead>
        <tbody>
          {(detail?.reloads ?? []).map((r, i) => (
            <tr key={`${r.at}-${i}`}>
              <td>{time(r.at)}</td>
              <td class="mono">{shortHash(r.hashBefore)} → {shortHash(r.hashAfter)}{r.hashBefore === r.hashAfter ? ' (unchanged)' : ''}</td>
              <td>{r.reason}</td>
            </tr>
          ))}
          {detail && detail.reloads.length === 0 && <tr><td colSpan={3}>No reloads recorded.</td></tr>}
        </tbody>
      </table>
    </article>
  );
}

/** `key=value, …` in key order; a dash for none (and from older panels). */
function labelText(labels: Record<string, string> | undefined): string {
  const entries = Object.entries(labels ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return entries.length === 0 ? '—' : entries.map(([k, v]) => `${k}=${v}`).join(', ');
}

/** Whether the node takes new replicas, and why not: lost, decommissioned, evacuating, cordoned. */
function placementText(row: FleetRow): string {
  if (row.lostAt) return `✕ declared lost at ${time(row.lostAt)}: decommissioned, its replicas placed on other nodes`;
  if (row.state === 'decommissioned') return '– decommissioned: runs nothing, gets nothing';
  if (row.evacuating) return '⇥ evacuating: cordoned, its replicas move to other nodes one at a time';
  if (row.cordoned) return '⊘ cordoned: no new services are placed here; those here keep running';
  return 'takes new services';
}
