-- Expand only (issue 36, a release rolls out across nodes with per-service settings): a service's
-- rollout.maxSurge, rollout.maxUnavailable (replicas, 0-100, not both 0) and rollout.progressDeadlineSeconds
-- (1-86400), as Kubernetes' strategy.rollingUpdate and progressDeadlineSeconds. Null: the default (maxSurge 1 and
-- maxUnavailable 0, or 0 and 1 with a writable volume or failover.fence; the panel's
-- TETHER_PROGRESS_DEADLINE_SECONDS). Older panels neither write nor read them; existing services keep the defaults.

-- AlterTable
ALTER TABLE "services" ADD COLUMN "rollout_max_surge" INTEGER,
ADD COLUMN "rollout_max_unavailable" INTEGER,
ADD COLUMN "rollout_progress_deadline_seconds" INTEGER;
