-- Expand only: service secrets, one row per version, encrypted by the panel (issue 24).

-- CreateTable
CREATE TABLE "service_secrets" (
    "id" BIGSERIAL NOT NULL,
    "service_id" TEXT NOT NULL,
    "name" TEXT NOT NULL,
    "version" INTEGER NOT NULL,
    "key_id" TEXT NOT NULL,
    "nonce" BYTEA NOT NULL,
    "ciphertext" BYTEA NOT NULL,
    "set_at" TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "removed_at" TIMESTAMP(3),

    CONSTRAINT "service_secrets_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "service_secrets_key_id_idx" ON "service_secrets"("key_id");

-- CreateIndex
CREATE UNIQUE INDEX "service_secrets_service_id_name_version_key" ON "service_secrets"("service_id", "name", "version");

-- AddForeignKey
ALTER TABLE "service_secrets" ADD CONSTRAINT "service_secrets_service_id_fkey" FOREIGN KEY ("service_id") REFERENCES "services"("id") ON DELETE CASCADE ON UPDATE CASCADE;
