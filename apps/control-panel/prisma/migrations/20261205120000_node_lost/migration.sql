-- Issue 38: an operator declared the node's host gone (POST /v1/nodes/:id/lost). The node is decommissioned too;
-- its services were given other homes, its stateful ones on empty volumes. Null: never declared lost.
ALTER TABLE "nodes" ADD COLUMN "lost_at" TIMESTAMP(3);
