import { age, shortId } from './format';
import type { AllocationView, NodeDetail } from './types';

// A node's allocations on its page (issue 36): one row per replica placed
// here, with its service, release, state and health in the status API's words
// (the panel presents them as GET /v1/services/:id/status does), its age, and
// for a replica failover moved here, from where. The panel sends at most a
// bounded number and says how many more there are.

function stateText(a: AllocationView): string {
  const why = [a.code, a.reason].filter(Boolean).join(': ');
  return `${a.state}${a.desired === 'stop' && a.state !== 'removed' ? ' (being removed)' : ''}${why ? ` — ${why}` : ''}`;
}

const STATE_CLASS: Record<string, string> = { running: 'ok', failed: 'bad', unknown: 'warn', pending: 'warn' };

export function AllocationTable(props: { detail: NodeDetail | null; now: number }) {
  const list = props.detail?.allocations;
  return (
    <>
      <h3 id="allocations-title">Allocations</h3>
      <table aria-labelledby="allocations-title" class="allocations">
        <thead>
          <tr><th scope="col">Service</th><th scope="col">Release</th><th scope="col">State</th><th scope="col">Health</th><th scope="col">Age</th><th scope="col">Moved here</th></tr>
        </thead>
        <tbody>
          {(list?.items ?? []).map((a) => (
            <tr key={a.allocationId} data-allocation={a.allocationId}>
              <th scope="row">{a.service}</th>
              <td class="mono" title={a.deploymentId ?? undefined}>
                {shortId(a.deploymentId)}
                {a.runningDeploymentId && a.runningDeploymentId !== a.deploymentId ? <span class="muted"> (runs {shortId(a.runningDeploymentId)})</span> : null}
              </td>
              <td class={`alloc-state ${STATE_CLASS[a.state] ?? ''}`}>{stateText(a)}</td>
              <td class="alloc-health">{a.health ?? '—'}</td>
              <td title={a.statusAgeMs === null ? 'never reported by its node' : `last reported ${age(a.statusAgeMs)} ago`}>{age(props.now - a.placedAt)}</td>
              <td class="alloc-moved">{a.movedFrom ?? '—'}</td>
            </tr>
          ))}
          {list && list.items.length === 0 && <tr><td colSpan={6}>No allocations on this node.</td></tr>}
          {props.detail && !list && <tr><td colSpan={6}>This panel does not list allocations.</td></tr>}
        </tbody>
        {list && list.more > 0 ? <caption class="alloc-more">and {list.more} more not shown</caption> : null}
      </table>
    </>
  );
}
