-- Expand only: a service's HTTP health check ({ path, port, intervalSeconds, timeoutSeconds, healthyThreshold,
-- unhealthyThreshold, startPeriodSeconds }, defaults filled). Older panels neither write nor read it; existing
-- services get none (their rollouts stay as they were).

-- AlterTable
ALTER TABLE "services" ADD COLUMN "health_check" JSONB;
