-- Idempotent keys for the session-fact writer (src/session-writes): a write
-- that timed out may still have committed, so a retried one must not add a
-- second row. Expand-only: one index and one nullable column.

-- A session opens once and closes once.
CREATE UNIQUE INDEX "session_events_session_id_kind_key" ON "session_events"("session_id", "kind");

-- A reload report is named by the session and the agent's message id.
ALTER TABLE "reload_events" ADD COLUMN "fact_key" TEXT;
CREATE UNIQUE INDEX "reload_events_fact_key_key" ON "reload_events"("fact_key");
