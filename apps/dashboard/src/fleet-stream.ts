import { useEffect, useState } from 'preact/hooks';
import { me } from './api';
import type { Changes, FleetRow, Snapshot } from './types';

// The one live stream of the page: a snapshot, then batches of changed rows
// (at most one a second) and moved last-frame times. Ages are computed here
// from the panel's clock (offset measured on every message) and tick every
// second without asking the panel.

export interface Fleet {
  rows: Map<string, FleetRow>;
  /** Bumped on every change, so memoised views know to recompute. */
  version: number;
  /** Panel clock minus browser clock (ms). */
  offset: number;
  connected: boolean;
}

export function useFleet(onSignedOut: () => void): Fleet {
  const [fleet, setFleet] = useState<Fleet>({ rows: new Map(), version: 0, offset: 0, connected: false });
  useEffect(() => {
    let source: EventSource | null = null;
    let retry: number | undefined;
    let stopped = false;
    const open = () => {
      source = new EventSource('/dashboard/api/stream');
      source.addEventListener('snapshot', (e) => {
        const data = JSON.parse((e as MessageEvent<string>).data) as Snapshot;
        const rows = new Map(data.rows.map((r) => [r.id, r]));
        setFleet((f) => ({ rows, version: f.version + 1, offset: data.now - Date.now(), connected: true }));
      });
      source.addEventListener('changes', (e) => {
        const data = JSON.parse((e as MessageEvent<string>).data) as Changes;
        setFleet((f) => {
          const rows = new Map(f.rows);
          for (const row of data.rows) rows.set(row.id, row);
          for (const [id, at] of Object.entries(data.frames)) {
            const row = rows.get(id);
            if (row) rows.set(id, { ...row, lastFrameAt: at });
          }
          for (const id of data.removed) rows.delete(id);
          return { rows, version: f.version + 1, offset: data.now - Date.now(), connected: true };
        });
      });
      source.addEventListener('signed-out', () => {
        source?.close();
        onSignedOut();
      });
      source.onerror = () => {
        setFleet((f) => ({ ...f, connected: false }));
        // A closed stream (an answer other than 200, e.g. 401) is not retried by the browser: check why and reopen.
        if (source?.readyState === EventSource.CLOSED && !stopped) {
          retry = window.setTimeout(async () => {
            const state = await me().catch(() => null);
            if (state && !state.signedIn) onSignedOut();
            else if (!stopped) open();
          }, 2_000);
        }
      };
    };
    open();
    return () => {
      stopped = true;
      window.clearTimeout(retry);
      source?.close();
    };
  }, [onSignedOut]);
  return fleet;
}

/** Re-renders every second, for ages. */
export function useTick(ms = 1_000): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = window.setInterval(() => setNow(Date.now()), ms);
    return () => window.clearInterval(t);
  }, [ms]);
  return now;
}
