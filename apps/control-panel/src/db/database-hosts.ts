// DATABASE_URL as libpq writes several servers: `postgresql://user:pw@h1:5432,h2:5433/db?target_session_attrs=read-write`.
// node-postgres parses one host only (its issue 2781), so the list is split
// here, once: each server gets a one-host URL that node-postgres reads, and the
// panel picks among them (primary-locator.ts). One host is the common case and
// parses the same way.

export interface DatabaseHost {
  host: string;
  port: number;
  /** The one-host URL of this server (user, password, database and parameters kept; target_session_attrs dropped). */
  url: string;
}

export class DatabaseUrlError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'DatabaseUrlError';
  }
}

const PREFIX = /^(postgres(?:ql)?:\/\/)([^/?#]*)(.*)$/s;

/** The servers of a (possibly multi-host) PostgreSQL URL, in the order written. Throws DatabaseUrlError. */
export function parseDatabaseHosts(url: string): DatabaseHost[] {
  const match = PREFIX.exec(url);
  if (!match) throw new DatabaseUrlError('must start with postgresql:// or postgres://');
  const [, scheme, authority, rest] = match as unknown as [string, string, string, string];
  const at = authority.lastIndexOf('@');
  const userInfo = at === -1 ? '' : authority.slice(0, at + 1);
  const hostList = authority.slice(at + 1);
  if (hostList === '') throw new DatabaseUrlError('names no host');
  const tail = withoutTargetSessionAttrs(rest);
  const hosts = hostList.split(',').map((entry) => {
    const { host, port } = splitHost(entry);
    const named = host.includes(':') ? `[${host}]` : host;
    return { host, port, url: `${scheme}${userInfo}${named}:${port}${tail}` };
  });
  const seen = new Set<string>();
  for (const h of hosts) {
    const key = `${h.host}:${h.port}`;
    if (seen.has(key)) throw new DatabaseUrlError(`names ${key} twice`);
    seen.add(key);
  }
  return hosts;
}

function splitHost(entry: string): { host: string; port: number } {
  if (entry === '') throw new DatabaseUrlError('has an empty host in its list');
  let host = entry;
  let portText: string | undefined;
  if (entry.startsWith('[')) {
    const close = entry.indexOf(']');
    if (close === -1) throw new DatabaseUrlError(`host ${entry}: unclosed [`);
    host = entry.slice(1, close);
    const after = entry.slice(close + 1);
    if (after !== '' && !after.startsWith(':')) throw new DatabaseUrlError(`host ${entry}: expected :port after ]`);
    portText = after === '' ? undefined : after.slice(1);
  } else {
    const colon = entry.lastIndexOf(':');
    if (colon !== -1) {
      host = entry.slice(0, colon);
      portText = entry.slice(colon + 1);
    }
  }
  if (host === '' || /[\s/@]/.test(host)) throw new DatabaseUrlError(`host ${JSON.stringify(entry)} is not a host name or address`);
  if (portText === undefined) return { host, port: 5432 };
  const port = /^\d{1,5}$/.test(portText) ? Number(portText) : NaN;
  if (!(port >= 1 && port <= 65_535)) throw new DatabaseUrlError(`host ${entry}: port must be 1-65535`);
  return { host, port };
}

/**
 * target_session_attrs is libpq's; the panel always wants the server that accepts writes, whatever it says
 * (read-write, primary, any: a panel cannot run on a read-only server), so it is dropped, not passed on.
 */
function withoutTargetSessionAttrs(rest: string): string {
  const q = rest.indexOf('?');
  if (q === -1) return rest;
  const hash = rest.indexOf('#', q);
  const query = rest.slice(q + 1, hash === -1 ? undefined : hash);
  const kept = query.split('&').filter((p) => p !== '' && !/^target_session_attrs=/i.test(p));
  return rest.slice(0, q) + (kept.length > 0 ? `?${kept.join('&')}` : '') + (hash === -1 ? '' : rest.slice(hash));
}
