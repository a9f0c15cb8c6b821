-- Issue 36: allocations (one replica of one release on one node), node labels and cordon, service placement.
-- Migration without a restart: every existing service is pinned to the node it runs on (placement.nodes) and
-- gets one allocation per replica there, running its current release (its newest running deployment), so an
-- upgrade moves and restarts nothing.
ALTER TABLE "nodes" ADD COLUMN "labels" JSONB NOT NULL DEFAULT '{}',
ADD COLUMN "cordoned" BOOLEAN NOT NULL DEFAULT false;

ALTER TABLE "services" ADD COLUMN "placement" JSONB NOT NULL DEFAULT '{}';

CREATE TABLE "allocations" (
    "id" TEXT NOT NULL,
    "service_id" TEXT NOT NULL,
    "node_id" TEXT NOT NULL,
    "release_id" TEXT,
    "desired" TEXT NOT NULL DEFAULT 'run',
    "cause" TEXT NOT NULL,
    "epoch" BIGINT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "allocations_pkey" PRIMARY KEY ("id")
);

CREATE INDEX "allocations_node_id_idx" ON "allocations"("node_id");
CREATE INDEX "allocations_service_id_idx" ON "allocations"("service_id");

ALTER TABLE "allocations" ADD CONSTRAINT "allocations_service_id_fkey" FOREIGN KEY ("service_id") REFERENCES "services"("id") ON DELETE CASCADE ON UPDATE CASCADE;
ALTER TABLE "allocations" ADD CONSTRAINT "allocations_node_id_fkey" FOREIGN KEY ("node_id") REFERENCES "nodes"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
ALTER TABLE "allocations" ADD CONSTRAINT "allocations_release_id_fkey" FOREIGN KEY ("release_id") REFERENCES "deployments"("id") ON DELETE SET NULL ON UPDATE CASCADE;

UPDATE "services" s SET "placement" = jsonb_build_object('nodes', jsonb_build_array(n."name"))
FROM "nodes" n WHERE n."id" = s."node_id";

INSERT INTO "allocations" ("id", "service_id", "node_id", "release_id", "desired", "cause", "epoch", "created_at")
SELECT 'alm_' || md5(s."id" || '/' || g.i), s."id", s."node_id",
    (SELECT d."id" FROM "deployments" d
      WHERE d."service_id" = s."id" AND d."node_id" = s."node_id" AND d."status" = 'running'
      ORDER BY d."created_at" DESC, d."id" DESC LIMIT 1),
    'run', 'migrated', 0, s."created_at"
FROM "services" s CROSS JOIN LATERAL generate_series(1, s."replicas") AS g(i);
