-- Issue 36: the drains of a managed deployment's allocation rollouts (agent → panel `allocations.drained`, capability
-- `allocations.drain`): one row per report, i.e. per rollout of the deployment's release on one node (the allocations
-- it moved, the connections open at the switch and cut, when it ended). The deployment's own drain fields are their sum
-- once it runs and every allocation running it is covered by a report (src/db/managed-drains.ts).
CREATE TABLE "deployment_drains" (
    "id" BIGSERIAL NOT NULL,
    "deployment_id" TEXT NOT NULL,
    "node_id" TEXT NOT NULL,
    "allocation_ids" TEXT[],
    "connections_open_at_switch" INTEGER,
    "connections_cut" INTEGER,
    "drain_ended_at" TIMESTAMP(3) NOT NULL,
    "session_id" TEXT NOT NULL,
    "recorded_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "deployment_drains_pkey" PRIMARY KEY ("id")
);

CREATE INDEX "deployment_drains_deployment_id_idx" ON "deployment_drains"("deployment_id");

ALTER TABLE "deployment_drains" ADD CONSTRAINT "deployment_drains_deployment_id_fkey" FOREIGN KEY ("deployment_id") REFERENCES "deployments"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "deployment_drains" ADD CONSTRAINT "deployment_drains_node_id_fkey" FOREIGN KEY ("node_id") REFERENCES "nodes"("id") ON DELETE CASCADE ON UPDATE CASCADE;
