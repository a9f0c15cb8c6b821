-- Issue 36, maintenance: a node being evacuated (POST /v1/nodes/:id/evacuate) is cordoned and evacuating; the
-- scheduler moves its managed replicas to other nodes one at a time. Uncordon ends it (false again).
ALTER TABLE "nodes" ADD COLUMN "evacuating" BOOLEAN NOT NULL DEFAULT false;
