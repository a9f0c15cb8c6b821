-- CreateEnum
CREATE TYPE "TokenRole" AS ENUM ('operator', 'customer');

-- CreateEnum
CREATE TYPE "DeploymentStatus" AS ENUM ('pending', 'delivered', 'running', 'failed', 'ack_timeout', 'unreachable', 'superseded');

-- CreateEnum
CREATE TYPE "SessionEventKind" AS ENUM ('opened', 'closed');

-- CreateTable
CREATE TABLE "teams" (
    "id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "teams_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "api_tokens" (
    "id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "role" "TokenRole" NOT NULL,
    "team_id" TEXT,
    "token_hash" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "last_used_at" TIMESTAMP(3),
    "revoked_at" TIMESTAMP(3),

    CONSTRAINT "api_tokens_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "nodes" (
    "id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "token_hash" TEXT NOT NULL,
    "decommissioned" BOOLEAN NOT NULL DEFAULT false,
    "decommissioned_at" TIMESTAMP(3),
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "last_seen_at" TIMESTAMP(3),
    "unreachable_since" TIMESTAMP(3),
    "last_teardown_at" TIMESTAMP(3),
    "last_teardown_reason" TEXT,

    CONSTRAINT "nodes_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "services" (
    "id" TEXT NOT NULL,
    "team_id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "image" TEXT NOT NULL,
    "env" JSONB NOT NULL DEFAULT '{}',
    "internal_port" INTEGER,
    "replicas" INTEGER NOT NULL DEFAULT 1,
    "node_id" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL,

    CONSTRAINT "services_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "routes" (
    "id" TEXT NOT NULL,
    "domain" TEXT NOT NULL,
    "path_prefix" TEXT,
    "service_id" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "routes_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "deployments" (
    "id" TEXT NOT NULL,
    "service_id" TEXT NOT NULL,
    "node_id" TEXT NOT NULL,
    "spec" JSONB NOT NULL,
    "status" "DeploymentStatus" NOT NULL DEFAULT 'pending',
    "reason" TEXT,
    "session_id" TEXT,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "dispatched_at" TIMESTAMP(3),
    "acked_at" TIMESTAMP(3),
    "finished_at" TIMESTAMP(3),

    CONSTRAINT "deployments_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "session_events" (
    "id" BIGSERIAL NOT NULL,
    "node_id" TEXT NOT NULL,
    "session_id" TEXT NOT NULL,
    "kind" "SessionEventKind" NOT NULL,
    "reason" TEXT,
    "close_code" INTEGER,
    "at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "session_events_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "reload_events" (
    "id" BIGSERIAL NOT NULL,
    "node_id" TEXT NOT NULL,
    "at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "hash_before" TEXT,
    "hash_after" TEXT NOT NULL,
    "reason" TEXT NOT NULL,

    CONSTRAINT "reload_events_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "teams_name_key" ON "teams"("name");

-- CreateIndex
CREATE UNIQUE INDEX "api_tokens_token_hash_key" ON "api_tokens"("token_hash");

-- CreateIndex
CREATE INDEX "api_tokens_team_id_idx" ON "api_tokens"("team_id");

-- CreateIndex
CREATE UNIQUE INDEX "nodes_name_key" ON "nodes"("name");

-- CreateIndex
CREATE UNIQUE INDEX "nodes_token_hash_key" ON "nodes"("token_hash");

-- CreateIndex
CREATE INDEX "services_node_id_idx" ON "services"("node_id");

-- CreateIndex
CREATE UNIQUE INDEX "services_team_id_name_key" ON "services"("team_id", "name");

-- CreateIndex
CREATE UNIQUE INDEX "routes_domain_key" ON "routes"("domain");

-- CreateIndex
CREATE INDEX "routes_service_id_idx" ON "routes"("service_id");

-- CreateIndex
CREATE INDEX "deployments_service_id_created_at_idx" ON "deployments"("service_id", "created_at");

-- CreateIndex
CREATE INDEX "deployments_node_id_status_idx" ON "deployments"("node_id", "status");

-- CreateIndex
CREATE INDEX "session_events_node_id_at_idx" ON "session_events"("node_id", "at");

-- CreateIndex
CREATE INDEX "reload_events_node_id_at_idx" ON "reload_events"("node_id", "at");

-- AddForeignKey
ALTER TABLE "api_tokens" ADD CONSTRAINT "api_tokens_team_id_fkey" FOREIGN KEY ("team_id") REFERENCES "teams"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "services" ADD CONSTRAINT "services_team_id_fkey" FOREIGN KEY ("team_id") REFERENCES "teams"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "services" ADD CONSTRAINT "services_node_id_fkey" FOREIGN KEY ("node_id") REFERENCES "nodes"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "routes" ADD CONSTRAINT "routes_service_id_fkey" FOREIGN KEY ("service_id") REFERENCES "services"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "deployments" ADD CONSTRAINT "deployments_service_id_fkey" FOREIGN KEY ("service_id") REFERENCES "services"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "deployments" ADD CONSTRAINT "deployments_node_id_fkey" FOREIGN KEY ("node_id") REFERENCES "nodes"("id") ON DELETE RESTRICT ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "session_events" ADD CONSTRAINT "session_events_node_id_fkey" FOREIGN KEY ("node_id") REFERENCES "nodes"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "reload_events" ADD CONSTRAINT "reload_events_node_id_fkey" FOREIGN KEY ("node_id") REFERENCES "nodes"("id") ON DELETE CASCADE ON UPDATE CASCADE;

