-- Expand only (issue 36, capacity honest): a service made while no node was eligible for it is still created,
-- without a home node (services.node_id NULL) and its replicas pending; the scheduler sets its home when it places
-- the first replica. Its deployments made meanwhile have no node either (deployments.node_id NULL) and get the
-- home with it. services.pending holds why replicas wait ({ count, code, message }: NO_NODE_AVAILABLE or
-- NO_NODE_MATCHES_LABELS), written at the creation and by the scheduler when it changes; null: none waits.
-- Existing rows keep their node and read pending null: nothing moves or restarts.

-- AlterTable
ALTER TABLE "services" ALTER COLUMN "node_id" DROP NOT NULL,
ADD COLUMN "pending" JSONB;

-- AlterTable
ALTER TABLE "deployments" ALTER COLUMN "node_id" DROP NOT NULL;
