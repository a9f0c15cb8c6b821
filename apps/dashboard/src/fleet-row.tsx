import { age, shortHash, time } from './format';
import type { FleetRow } from './types';

// One row of the fleet table. State is said in words and a symbol, never by
// colour alone.

export const ROW_HEIGHT = 34;
/** The sticky header's height (style.css), so keyboard scrolling keeps the active row below it. */
export const HEADER_HEIGHT = 40;

const STATE_TEXT: Record<FleetRow['state'], string> = {
  reachable: '● reachable',
  unreachable: '✕ unreachable',
  never_connected: '○ never connected',
  decommissioned: '– decommissioned',
};

export function FleetRowView(props: { row: FleetRow; index: number; now: number; active: boolean; onFocus: () => void; onOpen: () => void }) {
  const { row, now } = props;
  const href = `/dashboard/nodes/${encodeURIComponent(row.id)}`;
  const hb = row.heartbeatMs === null ? '—' : `${row.heartbeatMs / 1000} s`;
  const unhealthy = row.services.unhealthy ? ` (${row.services.unhealthy} unhealthy)` : '';
  const services = (row.services.running === null ? `? / ${row.services.desired}` : `${row.services.running} / ${row.services.desired}`) + unhealthy;
  const servicesShort = (row.services.running !== null && row.services.running < row.services.desired) || Boolean(row.services.unhealthy);
  return (
    <tr
      data-index={props.index}
      data-node={row.name}
      data-state={row.state}
      aria-rowindex={props.index + 2}
      tabIndex={props.active ? 0 : -1}
      class={`row-${row.state}${props.active ? ' active' : ''}`}
      onFocus={props.onFocus}
      onDblClick={props.onOpen}
    >
      <th scope="row">
        <a
          href={href}
          tabIndex={-1}
          onClick={(e) => {
            e.preventDefault();
            props.onOpen();
          }}
        >
          {row.name}
        </a>
      </th>
      <td class={`state state-${row.state}`}>
        {STATE_TEXT[row.state]}
        {row.lostAt ? <span class="flag lost" title="an operator declared its host gone; its replicas were placed on other nodes"> ✕ lost</span> : null}
        {row.evacuating && row.state !== 'decommissioned' ? <span class="flag evacuating" title="its replicas move to other nodes one at a time"> ⇥ evacuating</span> : null}
        {row.cordoned && !row.evacuating && row.state !== 'decommissioned' ? <span class="flag cordoned" title="no new services are placed here"> ⊘ cordoned</span> : null}
      </td>
      <td class="why" title={row.reasonDetail ?? undefined}>
        {row.state === 'unreachable' ? (
          <>
            <span class="reason">{row.reason}</span> <span class="muted">{age(row.since === null ? null : now - row.since)} ago</span>
          </>
        ) : (
          '—'
        )}
      </td>
      <td class="mono" title={row.sessionId ?? undefined}>{row.sessionId ? row.sessionId.slice(0, 12) : '—'}</td>
      <td>{row.connectedSince === null ? '—' : age(now - row.connectedSince)}</td>
      <td title={time(row.lastFrameAt)}>{row.lastFrameAt === null ? '—' : `${age(now - row.lastFrameAt)} ago`}</td>
      <td>{hb}</td>
      <td class={row.missedAcks24h > 0 ? 'warn' : ''}>{row.missedAcks24h}</td>
      <td class={servicesShort ? 'warn' : ''}>{services}</td>
      <td title={row.runtime?.error ?? undefined}>{row.runtime === null ? '—' : row.runtime.available ? 'available' : '✕ unavailable'}</td>
      <td class="reloads" title={row.lastReloadReason ?? undefined}>
        {row.reloadsToday}
        {row.lastReloadReason ? <span class="muted"> ({row.lastReloadReason})</span> : null}
      </td>
      <td class="mono">
        {row.routing.drifting && <span class="flag drift">⚠ drifting </span>}
        {shortHash(row.routing.desiredHash)} / {shortHash(row.routing.appliedHash)}
      </td>
    </tr>
  );
}
