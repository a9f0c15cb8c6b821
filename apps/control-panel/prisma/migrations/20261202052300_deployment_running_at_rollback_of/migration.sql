-- Expand only: when a deployment first reached running (kept when it is later superseded or fails), and the
-- deployment whose spec a rollback carries. Older panels neither write nor read them.

-- AlterTable
ALTER TABLE "deployments" ADD COLUMN "running_at" TIMESTAMP(3);

-- AlterTable
ALTER TABLE "deployments" ADD COLUMN "rollback_of" TEXT;

-- Rows that ran before this column: a running deployment finished when it reached running, and only a running
-- one is ever superseded (its finished_at is kept). A deployment that ran and failed later cannot be told apart.
UPDATE "deployments" SET "running_at" = "finished_at" WHERE "status" IN ('running', 'superseded') AND "finished_at" IS NOT NULL;
