-- Expand only: reload events get their kind and the agent's (boot epoch, sequence) key, so an event
-- resent after a reconnect or a retry is stored once; canary drops get their own table.

-- AlterTable
ALTER TABLE "reload_events" ADD COLUMN     "boot_epoch" BIGINT,
ADD COLUMN     "kind" TEXT NOT NULL DEFAULT 'change',
ADD COLUMN     "seq" INTEGER;

-- CreateTable
CREATE TABLE "canary_drops" (
    "id" BIGSERIAL NOT NULL,
    "node_id" TEXT NOT NULL,
    "at" TIMESTAMP(3) NOT NULL,
    "boot_epoch" BIGINT NOT NULL,
    "seq" INTEGER NOT NULL,
    "cause" TEXT NOT NULL,
    "reload_reason" TEXT,
    "close_code" INTEGER,
    "reconnect_ms" INTEGER,

    CONSTRAINT "canary_drops_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "canary_drops_node_id_at_idx" ON "canary_drops"("node_id", "at");

-- CreateIndex
CREATE UNIQUE INDEX "canary_drops_node_id_boot_epoch_seq_key" ON "canary_drops"("node_id", "boot_epoch", "seq");

-- CreateIndex
CREATE UNIQUE INDEX "reload_events_node_id_boot_epoch_seq_key" ON "reload_events"("node_id", "boot_epoch", "seq");

-- AddForeignKey
ALTER TABLE "canary_drops" ADD CONSTRAINT "canary_drops_node_id_fkey" FOREIGN KEY ("node_id") REFERENCES "nodes"("id") ON DELETE CASCADE ON UPDATE CASCADE;
