-- Expand only: a team's private registry credentials (issue 24), the password sealed by the panel
-- under the secrets keyring (AES-256-GCM, a key id on every row). One row per (team, normalised host).

-- CreateTable
CREATE TABLE "registries" (
    "id" TEXT NOT NULL,
    "team_id" TEXT NOT NULL,
    "host" TEXT NOT NULL,
    "username" TEXT NOT NULL,
    "key_id" TEXT NOT NULL,
    "nonce" BYTEA NOT NULL,
    "ciphertext" BYTEA NOT NULL,
    "created_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updated_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "registries_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "registries_key_id_idx" ON "registries"("key_id");

-- CreateIndex
CREATE UNIQUE INDEX "registries_team_id_host_key" ON "registries"("team_id", "host");

-- AddForeignKey
ALTER TABLE "registries" ADD CONSTRAINT "registries_team_id_fkey" FOREIGN KEY ("team_id") REFERENCES "teams"("id") ON DELETE CASCADE ON UPDATE CASCADE;
