-- Expand only: the named volumes each node's agent reports (issue 23, GET /v1/volumes). A panel of the
-- previous release does not read it; agents without volumes.inventory leave it empty.

-- CreateTable
CREATE TABLE "node_volumes" (
    "id" TEXT NOT NULL,
    "node_id" TEXT NOT NULL,
    "docker_name" TEXT NOT NULL,
    "service_id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "team_id" TEXT,
    "service_name" TEXT,
    "created_at" TIMESTAMPTZ(3),
    "size_bytes" BIGINT,
    "measured_at" TIMESTAMPTZ(3),
    "reported_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "node_volumes_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "node_volumes_team_id_idx" ON "node_volumes"("team_id");

-- CreateIndex
CREATE UNIQUE INDEX "node_volumes_node_id_docker_name_key" ON "node_volumes"("node_id", "docker_name");

-- AddForeignKey
ALTER TABLE "node_volumes" ADD CONSTRAINT "node_volumes_node_id_fkey" FOREIGN KEY ("node_id") REFERENCES "nodes"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "node_volumes" ADD CONSTRAINT "node_volumes_team_id_fkey" FOREIGN KEY ("team_id") REFERENCES "teams"("id") ON DELETE SET NULL ON UPDATE CASCADE;
