import type { Sql } from '../db/sql.js';
import type { DurableFact } from './facts.js';

// Session opens and closes, many in one statement. A reconnect storm opens
// thousands of sessions a second; one INSERT + UPDATE per open was a round
// trip each (and most of an open's database cost). Here a run of consecutive
// opens and closes is split into waves in which every node appears at most
// once (a statement cannot update one node row twice), each wave one
// statement, waves in order: a node's facts keep their order, and a tick of a
// storm (every node once) is one statement. Idempotent like the single-fact
// form: the node row moves only for an event row really inserted, and (issue
// 10) only while the fact's generation is the node's current claim (a fact
// without one, spilled by an older panel, is unfenced). An open also records
// the capabilities its session agreed on the node row (nodes.capabilities:
// the scheduler spreads replicas only over nodes that speak allocations).

export type SessionFact = Extract<DurableFact, { kind: 'session.opened' | 'session.closed' }>;

export const isSessionFact = (fact: DurableFact): fact is SessionFact => fact.kind === 'session.opened' || fact.kind === 'session.closed';

/** Splits facts into waves, each node at most once per wave, a node's facts in their order across waves. */
export function sessionWaves(facts: readonly SessionFact[]): SessionFact[][] {
  const waves: SessionFact[][] = [];
  const lastWave = new Map<string, number>();
  for (const fact of facts) {
    const wave = (lastWave.get(fact.nodeId) ?? -1) + 1;
    lastWave.set(fact.nodeId, wave);
    (waves[wave] ??= []).push(fact);
  }
  return waves;
}

/** Writes a run of session facts: one statement per wave. */
export async function applySessionFacts(sql: Sql, facts: readonly SessionFact[]): Promise<void> {
  for (const wave of sessionWaves(facts)) await applyWave(sql, wave);
}

async function applyWave(sql: Sql, wave: readonly SessionFact[]): Promise<void> {
  const closed = (f: SessionFact) => (f.kind === 'session.closed' ? f : undefined);
  const kinds = wave.map((f) => (f.kind === 'session.opened' ? 'opened' : 'closed'));
  const nodeIds = wave.map((f) => f.nodeId);
  const sessionIds = wave.map((f) => f.sessionId);
  const reasons = wave.map((f) => closed(f)?.reason ?? null);
  const codes = wave.map((f) => closed(f)?.code ?? null);
  const ats = wave.map((f) => f.at);
  const lastFrames = wave.map((f) => closed(f)?.lastFrameAt ?? null);
  const superseded = wave.map((f) => closed(f)?.superseded ?? false);
  const generations = wave.map((f) => f.generation ?? null);
  // Each open's agreed capabilities as a JSON array (unnest cannot take an array of arrays); null: keep the row's.
  const capabilities = wave.map((f) => (f.kind === 'session.opened' && f.capabilities ? JSON.stringify(f.capabilities) : null));
  // Written with the capabilities (an open that records them records the address too, null clearing it).
  const privateAddresses = wave.map((f) => (f.kind === 'session.opened' ? (f.privateAddress ?? null) : null));
  const challengePorts = wave.map((f) => (f.kind === 'session.opened' ? (f.challengePort ?? null) : null));
  const fenceAfters = wave.map((f) => (f.kind === 'session.opened' ? (f.fence?.afterMs ?? null) : null));
  const fenceStops = wave.map((f) => (f.kind === 'session.opened' ? (f.fence?.stopTimeoutMs ?? null) : null));
  // An open clears unreachable and moves last-seen to its time; a close records the teardown, and
  // unless superseded (the node stays reachable through its newer session) marks the node unreachable.
  // The generation fence is a join on node_owners' key: written as EXISTS (…) inside the OR, PostgreSQL
  // hashed the whole table for every statement (5 of 7 ms for 30 facts at 10,000 nodes).
  await sql.run(
    `WITH v AS (
      SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::int[], $6::timestamptz[], $7::timestamptz[], $8::bool[], $9::bigint[], $10::text[], $11::text[], $12::int[], $13::int[], $14::int[])
        AS v(kind, node_id, session_id, reason, close_code, at, last_frame_at, superseded, generation, capabilities, private_address, challenge_port, fence_after_ms, fence_stop_timeout_ms)
    ), ins AS (
      INSERT INTO session_events (node_id, session_id, kind, reason, close_code, at)
      SELECT node_id, session_id, kind::"SessionEventKind", reason, close_code, at FROM v
      ON CONFLICT (session_id, kind) DO NOTHING
      RETURNING session_id, kind::text AS kind
    )
    UPDATE nodes SET
      unreachable_since = CASE WHEN v.kind = 'opened' THEN NULL WHEN v.superseded THEN nodes.unreachable_since ELSE v.at END,
      last_seen_at = CASE
        WHEN v.kind = 'opened' THEN GREATEST(nodes.last_seen_at, v.at)
        WHEN v.superseded THEN nodes.last_seen_at
        ELSE GREATEST(nodes.last_seen_at, v.last_frame_at) END,
      last_teardown_at = CASE WHEN v.kind = 'closed' THEN v.at ELSE nodes.last_teardown_at END,
      last_teardown_reason = CASE WHEN v.kind = 'closed' THEN v.reason ELSE nodes.last_teardown_reason END,
      capabilities = CASE WHEN v.kind = 'opened' AND v.capabilities IS NOT NULL
        THEN ARRAY(SELECT jsonb_array_elements_text(v.capabilities::jsonb)) ELSE nodes.capabilities END,
      private_address = CASE WHEN v.kind = 'opened' AND v.capabilities IS NOT NULL THEN v.private_address ELSE nodes.private_address END,
      challenge_port = CASE WHEN v.kind = 'opened' AND v.capabilities IS NOT NULL THEN v.challenge_port ELSE nodes.challenge_port END,
      fence_after_ms = CASE WHEN v.kind = 'opened' AND v.capabilities IS NOT NULL THEN v.fence_after_ms ELSE nodes.fence_after_ms END,
      fence_stop_timeout_ms = CASE WHEN v.kind = 'opened' AND v.capabilities IS NOT NULL THEN v.fence_stop_timeout_ms ELSE nodes.fence_stop_timeout_ms END
    FROM v JOIN ins ON ins.session_id = v.session_id AND ins.kind = v.kind
      LEFT JOIN node_owners w ON w.node_id = v.node_id
    WHERE nodes.id = v.node_id
      AND (v.generation IS NULL OR w.generation = v.generation)`,
    [kinds, nodeIds, sessionIds, reasons, codes, ats, lastFrames, superseded, generations, capabilities, privateAddresses, challengePorts, fenceAfters, fenceStops],
  );
}
