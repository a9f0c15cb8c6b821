-- Expand only (issue 22, drain): a service's drainSeconds (a rollout setting like replicas: how long the old
-- containers keep their open connections after a switch), and on each deployment whether its agent reports the
-- drain (it announced workload.drain when the deployment was sent) with what it reported: the connections open at
-- the switch, those cut when the deadline fell (null: the agent's proxy cannot count) and when the drain ended.
-- Older panels neither write nor read them; existing services get the default 30 s, which an older agent's own
-- drain stands for.

-- AlterTable
ALTER TABLE "services" ADD COLUMN "drain_seconds" INTEGER NOT NULL DEFAULT 30;

-- AlterTable
ALTER TABLE "deployments" ADD COLUMN "reports_drain" BOOLEAN NOT NULL DEFAULT false,
ADD COLUMN "connections_open_at_switch" INTEGER,
ADD COLUMN "connections_cut" INTEGER,
ADD COLUMN "drain_ended_at" TIMESTAMP(3);
