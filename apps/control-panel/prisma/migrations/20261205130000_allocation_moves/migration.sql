-- Issue 38, a replica moved by failover says where from: the allocation a placed one replaces, and for a lost node's
-- replica the facts the scheduler acted on, kept on the replacement (the stopped row is deleted once its node
-- reports it removed): { "allocationId", "nodeId", "nodeName", "unreachableSince", "teardownReason" }. Expand only:
-- older panels neither read nor write them.
ALTER TABLE "allocations" ADD COLUMN "replaces" TEXT;
ALTER TABLE "allocations" ADD COLUMN "moved_from" JSONB;
