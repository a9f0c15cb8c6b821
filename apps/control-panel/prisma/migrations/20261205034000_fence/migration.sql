-- Expand only (issue 38, self-fencing): a service's failover.fence (work that must never run twice: its agents stop
-- it once they hear no panel for their fence deadline, and failover re-places it only after that deadline, the stop
-- grace and a margin), and on each node the fence deadline and stop grace its agent announced in hello.fence at its
-- last session open (null: the agent does not fence). Older panels neither write nor read them; existing services
-- are not fenced.

-- AlterTable
ALTER TABLE "services" ADD COLUMN "fence" BOOLEAN NOT NULL DEFAULT false;

-- AlterTable
ALTER TABLE "nodes" ADD COLUMN "fence_after_ms" INTEGER,
ADD COLUMN "fence_stop_timeout_ms" INTEGER;
