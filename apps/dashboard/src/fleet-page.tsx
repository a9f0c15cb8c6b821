import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { navigate } from './router';
import type { Fleet } from './fleet-stream';
import { useTick } from './fleet-stream';
import { FleetRowView, HEADER_HEIGHT, ROW_HEIGHT } from './fleet-row';
import type { FleetRow } from './types';

// The fleet table: sort, filter and search in the browser over the rows the
// stream keeps; only the rows in view are rendered (10,000 nodes are one
// snapshot and a few dozen DOM rows). Keyboard: the table is one tab stop;
// arrows, Page Up/Down, Home/End move between rows, Enter opens the node.

type Filter = 'all' | 'unreachable' | 'drifting' | 'reloads' | 'acks';
type Sort = 'problems' | 'name' | 'frame' | 'reloads' | 'acks';

/** A node reloading its proxy this often in a day is worth a look (each reload severs its WebSockets). */
const MANY_RELOADS = 10;
const OVERSCAN = 10;

const FILTERS: Record<Filter, (r: FleetRow) => boolean> = {
  all: () => true,
  unreachable: (r) => r.state === 'unreachable',
  drifting: (r) => r.routing.drifting,
  reloads: (r) => r.reloadsToday >= MANY_RELOADS,
  acks: (r) => r.missedAcks24h > 0,
};

const STATE_RANK: Record<FleetRow['state'], number> = { unreachable: 0, reachable: 1, never_connected: 2, decommissioned: 3 };

const SORTS: Record<Sort, (a: FleetRow, b: FleetRow) => number> = {
  problems: (a, b) =>
    STATE_RANK[a.state] - STATE_RANK[b.state] ||
    Number(b.routing.drifting) - Number(a.routing.drifting) ||
    b.missedAcks24h - a.missedAcks24h ||
    b.reloadsToday - a.reloadsToday ||
    a.name.localeCompare(b.name),
  name: (a, b) => a.name.localeCompare(b.name),
  frame: (a, b) => (a.lastFrameAt ?? 0) - (b.lastFrameAt ?? 0) || a.name.localeCompare(b.name),
  reloads: (a, b) => b.reloadsToday - a.reloadsToday || a.name.localeCompare(b.name),
  acks: (a, b) => b.missedAcks24h - a.missedAcks24h || a.name.localeCompare(b.name),
};

export function FleetPage(props: { fleet: Fleet }) {
  const { fleet } = props;
  const [query, setQuery] = useState('');
  const [filter, setFilter] = useState<Filter>('all');
  const [sort, setSort] = useState<Sort>('problems');
  const [active, setActive] = useState(0);
  const [scrollTop, setScrollTop] = useState(0);
  const [height, setHeight] = useState(600);
  const scroller = useRef<HTMLDivElement>(null);
  const body = useRef<HTMLTableSectionElement>(null);
  const now = useTick() + fleet.offset;

  const all = useMemo(() => [...fleet.rows.values()], [fleet.version]);
  const rows = useMemo(() => {
    const q = query.trim().toLowerCase();
    return all
      .filter((r) => FILTERS[filter](r) && (!q || r.name.toLowerCase().includes(q) || (r.sessionId ?? '').toLowerCase().includes(q)))
      .sort(SORTS[sort]);
  }, [all, query, filter, sort]);
  const counts = useMemo(() => {
    const c = { reachable: 0, unreachable: 0, drifting: 0 };
    for (const r of all) {
      if (r.state === 'reachable') c.reachable++;
      if (r.state === 'unreachable') c.unreachable++;
      if (r.routing.drifting) c.drifting++;
    }
    return c;
  }, [all]);

  useEffect(() => {
    const el = scroller.current;
    if (!el) return;
    const observer = new ResizeObserver(() => setHeight(el.clientHeight));
    observer.observe(el);
    return () => observer.disconnect();
  }, []);
  const current = Math.min(active, Math.max(0, rows.length - 1));
  const first = Math.max(0, Math.floor(scrollTop / ROW_HEIGHT) - OVERSCAN);
  const last = Math.min(rows.length, Math.ceil((scrollTop + height) / ROW_HEIGHT) + OVERSCAN);

  // Keep the active row in view and focused when it moves by keyboard.
  const moveTo = (index: number) => {
    const i = Math.max(0, Math.min(rows.length - 1, index));
    setActive(i);
    const el = scroller.current;
    if (!el) return;
    const headerHeight = HEADER_HEIGHT;
    if (i * ROW_HEIGHT < el.scrollTop) el.scrollTop = i * ROW_HEIGHT;
    else if ((i + 1) * ROW_HEIGHT + headerHeight > el.scrollTop + el.clientHeight) el.scrollTop = (i + 1) * ROW_HEIGHT + headerHeight - el.clientHeight;
    // The row is usually rendered already; one scrolled in from far away is there after the next render.
    const focusRow = () => body.current?.querySelector<HTMLElement>(`tr[data-index="${i}"]`);
    const rendered = focusRow();
    if (rendered) rendered.focus();
    else requestAnimationFrame(() => focusRow()?.focus());
  };
  const onKeyDown = (e: KeyboardEvent) => {
    const page = Math.max(1, Math.floor(height / ROW_HEIGHT) - 1);
    const keys: Record<string, () => void> = {
      ArrowDown: () => moveTo(current + 1),
      ArrowUp: () => moveTo(current - 1),
      PageDown: () => moveTo(current + page),
      PageUp: () => moveTo(current - page),
      Home: () => moveTo(0),
      End: () => moveTo(rows.length - 1),
      Enter: () => rows[current] && navigate(`/dashboard/nodes/${encodeURIComponent(rows[current].id)}`),
    };
    const action = keys[e.key];
    if (!action) return;
    e.preventDefault();
    action();
  };

  return (
    <section aria-labelledby="fleet-title">
      <div class="summary">
        <h2 id="fleet-title">Nodes</h2>
        <span>{all.length} nodes</span>
        <span class="ok">● {counts.reachable} reachable</span>
        <span class={counts.unreachable ? 'bad' : ''}>✕ {counts.unreachable} unreachable</span>
        <span class={counts.drifting ? 'warn' : ''}>⚠ {counts.drifting} drifting</span>
      </div>
      <div class="controls" role="search">
        <label>
          Search
          <input type="search" value={query} onInput={(e) => setQuery((e.currentTarget as HTMLInputElement).value)} placeholder="node or session id" />
        </label>
        <label>
          Show
          <select value={filter} onChange={(e) => setFilter((e.currentTarget as HTMLSelectElement).value as Filter)}>
            <option value="all">all nodes</option>
            <option value="unreachable">unreachable</option>
            <option value="drifting">routing drifting</option>
            <option value="reloads">{`${MANY_RELOADS}+ reloads today`}</option>
            <option value="acks">missed ACKs (24 h)</option>
          </select>
        </label>
        <label>
          Sort by
          <select value={sort} onChange={(e) => setSort((e.currentTarget as HTMLSelectElement).value as Sort)}>
            <option value="problems">problems first</option>
            <option value="name">name</option>
            <option value="frame">oldest last frame</option>
            <option value="reloads">reloads today</option>
            <option value="acks">missed ACKs</option>
          </select>
        </label>
        <span aria-live="polite">{rows.length} shown</span>
      </div>
      <div class="table-scroll" ref={scroller} onScroll={(e) => setScrollTop((e.currentTarget as HTMLDivElement).scrollTop)}>
        <table class="fleet" aria-rowcount={rows.length + 1} aria-describedby="fleet-help">
          <caption id="fleet-help">Fleet: one row per node. Arrow keys move between rows, Enter opens a node.</caption>
          <thead>
            <tr>
              <th scope="col">Node</th>
              <th scope="col">State</th>
              <th scope="col">Since, why</th>
              <th scope="col">Session</th>
              <th scope="col">Connected for</th>
              <th scope="col">Last frame</th>
              <th scope="col">Heartbeat</th>
              <th scope="col">Missed ACKs (24 h)</th>
              <th scope="col">Services (running / desired)</th>
              <th scope="col">Runtime</th>
              <th scope="col">Reloads today (last reason)</th>
              <th scope="col">Routing (desired / applied)</th>
            </tr>
          </thead>
          <tbody ref={body} onKeyDown={onKeyDown}>
            {first > 0 && <tr class="spacer" aria-hidden="true" style={{ height: `${first * ROW_HEIGHT}px` }} />}
            {rows.slice(first, last).map((row, i) => (
              <FleetRowView
                key={row.id}
                row={row}
                index={first + i}
                now={now}
                active={first + i === current}
                onFocus={() => setActive(first + i)}
                onOpen={() => navigate(`/dashboard/nodes/${encodeURIComponent(row.id)}`)}
              />
            ))}
            {last < rows.length && <tr class="spacer" aria-hidden="true" style={{ height: `${(rows.length - last) * ROW_HEIGHT}px` }} />}
          </tbody>
        </table>
        {rows.length === 0 && <p class="empty">{fleet.connected ? 'No node matches.' : 'Waiting for the panel…'}</p>}
      </div>
    </section>
  );
}
