// How `tether routes` and `tether status` show a route's health and its
// certificate, as the panel answers them (docs/api.md, "Route health").
// Reasons are printed as the panel words them, so a reason this CLI does not
// know yet still reads.

export interface RouteHealth {
  state: 'serving' | 'failing' | 'unknown';
  reason: string;
}

export interface RouteCertificate {
  issuer: string | null;
  notAfter: string | null;
  lastError: string | null;
}

export interface RouteState {
  domain: string;
  pathPrefix: string | null;
  /** Absent from panels before route probes. */
  health?: RouteHealth;
  certificate?: RouteCertificate | null;
}

/** A certificate with fewer days left is flagged (the alert TetherCertificateExpiringSoon's bound). */
export const EXPIRING_SOON_DAYS = 14;
const DAY_MS = 86_400_000;

/** Whole days until notAfter (negative once expired); null when unknown. */
export function daysLeft(notAfter: string | null, now: number): number | null {
  if (notAfter === null) return null;
  const at = Date.parse(notAfter);
  return Number.isNaN(at) ? null : Math.floor((at - now) / DAY_MS);
}

export const routeName = (r: Pick<RouteState, 'domain' | 'pathPrefix'>) => `${r.domain}${r.pathPrefix ?? ''}`;

/** `serving`, or the state with its reason (why it fails or is unknown). */
export function healthText(r: RouteState): string {
  if (!r.health) return '-';
  return r.health.state === 'serving' ? 'serving' : `${r.health.state}: ${r.health.reason}`;
}

/** `expires in N d`, `expired N d ago`, flagged when soon; then the last error, if any. `-` when none was seen. */
export function certificateText(c: RouteCertificate | null | undefined, now: number): string {
  if (!c) return '-';
  const days = daysLeft(c.notAfter, now);
  const parts: string[] = [];
  if (days !== null) parts.push(days < 0 ? `expired ${-days} d ago` : `expires in ${days} d${days < EXPIRING_SOON_DAYS ? ' (soon)' : ''}`);
  if (c.lastError) parts.push(`error: ${c.lastError}`);
  return parts.length === 0 ? '-' : parts.join(', ');
}

/** What needs a person's eye on one route: failing, or a certificate expiring soon or in error; none when all is well. */
export function routeProblems(r: RouteState, now: number): string[] {
  const out: string[] = [];
  if (r.health?.state === 'failing') out.push(`${routeName(r)} failing: ${r.health.reason}`);
  const c = r.certificate;
  const days = c ? daysLeft(c.notAfter, now) : null;
  if (c && (c.lastError || (days !== null && days < EXPIRING_SOON_DAYS))) out.push(`${routeName(r)} certificate ${certificateText(c, now)}`);
  return out;
}

/** `2/3 serving`, or `-` when the service has no routes (or the panel reports none). */
export function servingText(routes: RouteState[] | undefined): string {
  if (!routes || routes.length === 0) return '-';
  return `${routes.filter((r) => r.health?.state === 'serving').length}/${routes.length} serving`;
}
