import type { Route } from '@tether/protocol';

// The reason a reload is recorded with: which domains it added, removed or
// changed. Operators read it next to the reload count to tell a deploy from a
// loop that reloads for nothing.

const MAX_NAMED = 10;

/** What each domain renders to: its path prefixes and upstreams (service ids do not reach the config). */
function byDomain(routes: readonly Route[]): Map<string, string> {
  const groups = new Map<string, string[]>();
  for (const r of routes) {
    const list = groups.get(r.domain) ?? [];
    list.push(`${r.pathPrefix ?? ''}\u0000${r.upstream}`);
    groups.set(r.domain, list);
  }
  return new Map([...groups].map(([domain, list]) => [domain, list.sort().join('\u0001')]));
}

function named(verb: string, domains: string[]): string | null {
  if (domains.length === 0) return null;
  const shown = domains.slice(0, MAX_NAMED).join(', ');
  const more = domains.length > MAX_NAMED ? ` and ${domains.length - MAX_NAMED} more` : '';
  return `${verb} ${shown}${more}`;
}

/** e.g. "added shop.example.com; removed old.example.com"; null when the domains render the same. */
export function describeRouteChange(before: readonly Route[], after: readonly Route[]): string | null {
  const previous = byDomain(before);
  const next = byDomain(after);
  const added = [...next.keys()].filter((d) => !previous.has(d)).sort();
  const removed = [...previous.keys()].filter((d) => !next.has(d)).sort();
  const changed = [...next.keys()].filter((d) => previous.has(d) && previous.get(d) !== next.get(d)).sort();
  const parts = [named('added', added), named('removed', removed), named('changed', changed)].filter((p) => p !== null);
  return parts.length === 0 ? null : parts.join('; ');
}
