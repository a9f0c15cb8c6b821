// What the panel sends: the row type is the panel's own (fleet-wire.ts, type
// only, nothing of the panel is bundled); the messages around it come from
// http/dashboard.ts and dashboard/fleet-feed.ts.

export type { FleetRow, FleetState } from '../../control-panel/src/dashboard/fleet-wire';
import type { FleetRow } from '../../control-panel/src/dashboard/fleet-wire';

export interface Snapshot {
  now: number;
  rows: FleetRow[];
}

export interface Changes {
  now: number;
  rows: FleetRow[];
  frames: Record<string, number | null>;
  removed: string[];
}

export interface NodeDetail {
  now: number;
  row: FleetRow;
  sessions: { sessionId: string; kind: 'opened' | 'closed'; at: number; reason: string | null; closeCode: number | null }[];
  reloads: { at: number; hashBefore: string | null; hashAfter: string; reason: string }[];
  services: {
    serviceId: string;
    name: string;
    state: string;
    desiredReplicas: number;
    runningReplicas: number | null;
    reason: string;
    containers: { name: string; state: string; health: string; restartCount: number; since: string }[];
    evidence: { sessionId: string; lastFrameAgeMs: number; reportAgeMs: number } | null;
  }[];
}
