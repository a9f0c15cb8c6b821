import { CAPABILITIES, hasWritableVolume } from '@tether/protocol';
import type { Tx } from '../db/database.js';
import { prismaSql } from '../db/sql.js';
import { stringRecordOf } from '../db/json-columns.js';
import { homeJoin, managedSql } from '../db/where-services-run.js';
import type { AllocationRow, DeploymentRow, ServiceRow } from '../scheduling/evaluation.js';
import { LIVE_ELSEWHERE, type NodeFacts } from '../scheduling/managed.js';
import type { ReportedStatus } from '../scheduling/rollout-progress.js';

// What one evaluation of the scheduler reads (scheduler-loop.ts), on the
// transaction it writes in: the managed services (db/where-services-run.ts),
// every node with its liveness as cluster/node-reports.ts reads it, the
// services' allocations and their deployments in flight or running. Plain
// SQL, times as the database's epoch milliseconds.

interface ServiceSql {
  id: string;
  node_id: string | null;
  home_name: string | null;
  pending: unknown;
  replicas: number;
  placement: unknown;
  volumes: { readOnly?: boolean }[] | null;
  routed: boolean;
  created_ms: number;
  fence: boolean;
  max_surge: number | null;
  max_unavailable: number | null;
  progress_deadline_s: number | null;
}

interface NodeSql {
  id: string;
  name: string;
  cordoned: boolean;
  evacuating: boolean;
  decommissioned: boolean;
  lost: boolean;
  labels: unknown;
  capabilities: string[] | null;
  live_elsewhere: boolean;
  down_ms: number | null;
  fence_after_ms: number | null;
  fence_stop_timeout_ms: number | null;
}

interface AllocationSql {
  id: string;
  service_id: string;
  node_id: string;
  release_id: string | null;
  desired: string;
  created_ms: number;
  status: ReportedStatus | null;
  status_ms: number | null;
}

interface DeploymentSql {
  id: string;
  service_id: string;
  status: DeploymentRow['status'];
  created_ms: number;
  dispatched_ms: number | null;
  reason: string | null;
}

/**
 * Since when a node has had no live session anywhere (failover, issue 38): its recorded teardown, or the lease
 * expiry of the panel that owns it when that panel itself died (its report may still say connected), the later.
 */
const DOWN_SINCE = `(SELECT max(t) FROM (VALUES
    ((extract(epoch FROM n.last_teardown_at) * 1000)::float8),
    ((SELECT (extract(epoch FROM p.lease_until) * 1000)::float8 FROM node_owners w JOIN panels p ON p.id = w.panel_id
      WHERE w.node_id = n.id AND p.lease_until <= now()))) AS d(t))`;

/** Everything one evaluation reads, on the transaction it writes in. Times are the database's, in ms. */
export async function readState(tx: Tx, holdsSession: (nodeId: string) => boolean) {
  const sql = prismaSql(tx);
  const [clock] = await sql.rows<{ now_ms: number }>(`SELECT (extract(epoch FROM now()) * 1000)::float8 AS now_ms`);
  const services = await sql.rows<ServiceSql>(
    `SELECT s.id, s.node_id, h.name AS home_name, s.replicas, s.placement, s.volumes, s.fence, s.pending,
      s.rollout_max_surge AS max_surge, s.rollout_max_unavailable AS max_unavailable, s.rollout_progress_deadline_seconds AS progress_deadline_s, (extract(epoch FROM s.created_at) * 1000)::float8 AS created_ms,
      (EXISTS (SELECT 1 FROM routes r WHERE r.service_id = s.id) AND NOT COALESCE('${CAPABILITIES.ROUTING_REMOTE}' = ANY(h.capabilities), false)) AS routed
    FROM services s ${homeJoin('s', 'h')}
    WHERE ${managedSql('s', 'h')}
    ORDER BY s.id`,
  );
  // No managed service: nothing to place, move or fail over, and every other read is of managed services too. The
  // node read (every node, with its liveness) is the costly one: a fleet of agents without workload.allocations
  // pays nothing for it (10,000 nodes read at each evaluation slowed a reconnect storm fivefold, bench/fleet.ts).
  if (services.length === 0) return { now: Number(clock!.now_ms), services: [], nodes: [], allocations: [], deployments: [] };
  const nodes = await sql.rows<NodeSql>(
    `SELECT n.id, n.name, n.cordoned, n.evacuating, n.decommissioned, n.lost_at IS NOT NULL AS lost, n.labels, n.capabilities, ${LIVE_ELSEWHERE} AS live_elsewhere, ${DOWN_SINCE} AS down_ms,
      n.fence_after_ms, n.fence_stop_timeout_ms FROM nodes n ORDER BY n.name`,
  );
  const allocations = await sql.rows<AllocationSql>(
    `SELECT a.id, a.service_id, a.node_id, a.release_id, a.desired, (extract(epoch FROM a.created_at) * 1000)::float8 AS created_ms,
      a.status, (extract(epoch FROM a.status_at) * 1000)::float8 AS status_ms
    FROM allocations a JOIN services s ON s.id = a.service_id ${homeJoin('s', 'h')}
    WHERE ${managedSql('s', 'h')}`,
  );
  // deployments' times are timestamp(3) holding UTC (as Prisma writes them).
  const deployments = await sql.rows<DeploymentSql>(
    `SELECT d.id, d.service_id, d.status::text AS status, (extract(epoch FROM d.created_at AT TIME ZONE 'UTC') * 1000)::float8 AS created_ms,
      (extract(epoch FROM d.dispatched_at AT TIME ZONE 'UTC') * 1000)::float8 AS dispatched_ms, d.reason
    FROM deployments d JOIN services s ON s.id = d.service_id ${homeJoin('s', 'h')}
    WHERE ${managedSql('s', 'h')} AND d.status IN ('pending', 'delivered', 'running')`,
  );
  return {
    now: Number(clock!.now_ms),
    services: services.map(
      (s): ServiceRow => ({
        id: s.id,
        homeNodeId: s.node_id,
        homeName: s.home_name,
        pending: s.pending,
        replicas: s.replicas,
        placement: s.placement,
        routed: s.routed,
        stateful: hasWritableVolume({ volumes: (Array.isArray(s.volumes) ? s.volumes : []) as never }),
        createdAt: Number(s.created_ms),
        fenced: s.fence,
        rollout: { maxSurge: s.max_surge, maxUnavailable: s.max_unavailable, progressDeadlineSeconds: s.progress_deadline_s },
      }),
    ),
    nodes: nodes.map(
      (n): NodeFacts => ({
        id: n.id,
        name: n.name,
        live: holdsSession(n.id) || n.live_elsewhere,
        cordoned: n.cordoned,
        evacuating: n.evacuating,
        decommissioned: n.decommissioned,
        ...(n.lost ? { lost: true } : {}),
        labels: stringRecordOf(n.labels),
        capabilities: n.capabilities ?? [],
        downSince: n.down_ms === null ? null : Number(n.down_ms),
        fence: n.fence_after_ms === null ? null : { afterMs: n.fence_after_ms, stopTimeoutMs: n.fence_stop_timeout_ms ?? 0 },
      }),
    ),
    allocations: allocations.map(
      (a): AllocationRow => ({
        id: a.id,
        serviceId: a.service_id,
        nodeId: a.node_id,
        releaseId: a.release_id,
        desired: a.desired === 'stop' ? 'stop' : 'run',
        createdAt: Number(a.created_ms),
        status: a.status,
        statusAt: a.status_ms === null ? null : Number(a.status_ms),
      }),
    ),
    deployments: deployments.map(
      (d): DeploymentRow => ({
        id: d.id,
        serviceId: d.service_id,
        status: d.status,
        createdAt: Number(d.created_ms),
        dispatchedAt: d.dispatched_ms === null ? null : Number(d.dispatched_ms),
        reason: d.reason,
      }),
    ),
  };
}

