-- Expand only (older panels keep running while newer ones start): panels with leases, node ownership
-- with a generation, and the owner's per-node report. Nothing existing is changed or dropped.

-- CreateTable
CREATE TABLE "panels" (
    "id" TEXT NOT NULL,
    "internal_url" TEXT,
    "lease_until" TIMESTAMPTZ(3) NOT NULL,
    "renewed_at" TIMESTAMPTZ(3) NOT NULL,
    "started_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "panels_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "node_owners" (
    "node_id" TEXT NOT NULL,
    "panel_id" TEXT NOT NULL,
    "session_id" TEXT NOT NULL,
    "generation" BIGINT NOT NULL,
    "claimed_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "node_owners_pkey" PRIMARY KEY ("node_id")
);

-- CreateTable
CREATE TABLE "node_reports" (
    "node_id" TEXT NOT NULL,
    "panel_id" TEXT NOT NULL,
    "session_id" TEXT NOT NULL,
    "generation" BIGINT NOT NULL,
    "state" TEXT NOT NULL,
    "last_frame_at" TIMESTAMPTZ(3) NOT NULL,
    "report" JSONB NOT NULL,
    "updated_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "node_reports_pkey" PRIMARY KEY ("node_id")
);

-- CreateIndex
CREATE INDEX "node_owners_panel_id_idx" ON "node_owners"("panel_id");

-- AddForeignKey
ALTER TABLE "node_owners" ADD CONSTRAINT "node_owners_node_id_fkey" FOREIGN KEY ("node_id") REFERENCES "nodes"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "node_reports" ADD CONSTRAINT "node_reports_node_id_fkey" FOREIGN KEY ("node_id") REFERENCES "nodes"("id") ON DELETE CASCADE ON UPDATE CASCADE;
