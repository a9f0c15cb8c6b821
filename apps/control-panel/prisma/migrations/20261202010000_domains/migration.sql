-- Issue 21: routes per (domain, path prefix); a domain belongs to one team and one node (table domains,
-- locked by every attach). Not expand-only: an older panel relied on routes_domain_key for DOMAIN_TAKEN,
-- so during a rolling upgrade an older panel could attach a second whole-domain route; upgrade panels together.

-- DropIndex
DROP INDEX "routes_domain_key";

-- CreateTable
CREATE TABLE "domains" (
    "name" TEXT NOT NULL,
    "team_id" TEXT NOT NULL,
    "node_id" TEXT NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "domains_pkey" PRIMARY KEY ("name")
);

-- CreateIndex
CREATE INDEX "domains_team_id_idx" ON "domains"("team_id");

-- CreateIndex
CREATE INDEX "domains_node_id_idx" ON "domains"("node_id");

-- CreateIndex
CREATE UNIQUE INDEX "routes_domain_path_prefix_key" ON "routes"("domain", "path_prefix");

-- AddForeignKey
ALTER TABLE "domains" ADD CONSTRAINT "domains_team_id_fkey" FOREIGN KEY ("team_id") REFERENCES "teams"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "domains" ADD CONSTRAINT "domains_node_id_fkey" FOREIGN KEY ("node_id") REFERENCES "nodes"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Every domain routed today: one route per domain, so its service's team and node.
INSERT INTO "domains" ("name", "team_id", "node_id")
SELECT DISTINCT ON (r."domain") r."domain", s."team_id", s."node_id"
FROM "routes" r JOIN "services" s ON s."id" = r."service_id"
ORDER BY r."domain";
