-- Issue 37, cross-node routing: the node's address on the operators' private network, as its agent announced it
-- (hello.privateAddress, capability routing.remote) at its last session open; null: none announced. Replicas of
-- routed services publish their ports on it, and GET /v1/routes/:id names it for every serving node.
ALTER TABLE "nodes" ADD COLUMN "private_address" TEXT;
