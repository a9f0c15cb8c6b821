-- Issue 36 wiring: what each node's agent announced at its last session open (the scheduler places spread
-- replicas only on nodes whose agent speaks workload.allocations), and each allocation as its node last
-- reported it in allocations.status (every panel reads it: status, rollout progress).
ALTER TABLE "nodes" ADD COLUMN "capabilities" TEXT[] DEFAULT ARRAY[]::TEXT[];

ALTER TABLE "allocations" ADD COLUMN "status" JSONB,
ADD COLUMN "status_at" TIMESTAMPTZ(3),
ADD COLUMN "status_session" TEXT;
