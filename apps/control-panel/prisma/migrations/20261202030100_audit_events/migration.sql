-- Expand only: the audit trail (issue 24).

-- CreateTable
CREATE TABLE "audit_events" (
    "id" TEXT NOT NULL,
    "at" TIMESTAMPTZ(3) NOT NULL,
    "actor_token_id" TEXT,
    "actor_name" TEXT,
    "actor_kind" TEXT,
    "team_id" TEXT,
    "action" TEXT NOT NULL,
    "target_type" TEXT NOT NULL,
    "target_id" TEXT,
    "outcome" TEXT NOT NULL,
    "code" TEXT,
    "request_id" TEXT,
    "source_address" TEXT,

    CONSTRAINT "audit_events_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "audit_events_at_id_idx" ON "audit_events"("at", "id");

-- CreateIndex
CREATE INDEX "audit_events_team_id_at_idx" ON "audit_events"("team_id", "at");

-- CreateIndex
CREATE INDEX "audit_events_actor_token_id_at_idx" ON "audit_events"("actor_token_id", "at");

-- CreateIndex
CREATE INDEX "audit_events_target_type_target_id_idx" ON "audit_events"("target_type", "target_id");
