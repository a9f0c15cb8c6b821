import { time } from './format';
import type { NodeDetail, RouteView } from './types';

// A node's routes on its page: each route's health as its node's agent last
// probed it (the state, and on failing the probe's evidence), and the
// certificate its domain served (issuer, days to expiry, the last error).
// Reasons and evidence are shown as the panel sends them, so a field or a
// reason this page does not know yet still reads.

/** A certificate this close to its end is flagged (the alert TetherCertificateExpiringSoon's bound). */
const EXPIRING_SOON_DAYS = 14;
const DAY_MS = 86_400_000;

/** Evidence fields shown in their own words; any other field is shown as `name: value`. */
const KNOWN = new Set(['domain', 'pathPrefix', 'state', 'at', 'status', 'madeBy', 'error', 'latencyMs', 'sessionId']);

/** A field the page has no word for: `a b`, lists joined by `, `, objects as `name a, name b`. */
function valueText(v: unknown): string {
  if (Array.isArray(v)) return v.length === 0 ? 'none' : v.map(valueText).join(', ');
  if (v !== null && typeof v === 'object') return Object.entries(v).map(([k, x]) => `${k} ${valueText(x)}`).join('; ');
  return String(v);
}

/** The probe behind a route's state. What the answer was only when the route fails on it (an unknown route may not have been probed at all). */
export function evidenceText(e: NonNullable<RouteView['health']['evidence']>, state: string): string {
  const parts = [
    ...(state === 'failing' ? [e.status === null ? 'no answer' : `status ${e.status} made by ${e.madeBy}`] : []),
    ...(e.error ? [e.error] : []),
    ...(state === 'failing' ? [`${e.latencyMs} ms`] : []),
    `at ${time(Date.parse(e.at))}`,
    ...Object.entries(e)
      .filter(([k, v]) => !KNOWN.has(k) && v !== null && v !== undefined)
      .map(([k, v]) => `${k}: ${valueText(v)}`),
    `session ${e.sessionId}`,
  ];
  return parts.join(' · ');
}

export function daysLeft(notAfter: string | null, now: number): number | null {
  if (notAfter === null) return null;
  const at = Date.parse(notAfter);
  return Number.isNaN(at) ? null : Math.floor((at - now) / DAY_MS);
}

function Certificate(props: { certificate: RouteView['certificate']; now: number }) {
  const c = props.certificate;
  if (c === null) return <span class="muted">none seen</span>;
  const days = daysLeft(c.notAfter, props.now);
  const soon = days !== null && days < EXPIRING_SOON_DAYS;
  return (
    <>
      <span class="mono">{c.issuer ?? 'issuer unknown'}</span>
      {days !== null && (
        <span class={soon ? 'bad cert-expiry' : 'cert-expiry'}>
          {' · '}{days < 0 ? `expired ${-days} d ago` : `expires in ${days} d`}{soon && days >= 0 ? ' ⚠' : ''}
        </span>
      )}
      {c.lastError && <span class="bad cert-error"> · ✕ {c.lastError}</span>}
    </>
  );
}

export function RouteTable(props: { detail: NodeDetail | null; now: number }) {
  const routes = (props.detail?.services ?? []).flatMap((s) => (s.routes ?? []).map((r) => ({ ...r, service: s.name })));
  return (
    <>
      <h3 id="routes-title">Routes</h3>
      <table aria-labelledby="routes-title">
        <thead>
          <tr><th scope="col">Route</th><th scope="col">Service</th><th scope="col">Health</th><th scope="col">Why</th><th scope="col">Certificate</th></tr>
        </thead>
        <tbody>
          {routes.map((r) => (
            <tr key={r.id} data-route={`${r.domain}${r.pathPrefix ?? ''}`}>
              <th scope="row" class="mono">{r.domain}{r.pathPrefix ?? ''}</th>
              <td>{r.service}</td>
              <td class={`route route-${r.health.state}`}>{r.health.state}</td>
              <td>
                {r.health.reason}
                {r.health.state !== 'serving' && r.health.evidence && <span class="muted evidence"> ({evidenceText(r.health.evidence, r.health.state)})</span>}
              </td>
              <td><Certificate certificate={r.certificate} now={props.now} /></td>
            </tr>
          ))}
          {props.detail && routes.length === 0 && <tr><td colSpan={5}>No routes on this node.</td></tr>}
        </tbody>
      </table>
    </>
  );
}
