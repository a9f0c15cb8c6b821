-- Expand only: the hash (SHA-256, hex) of the random secret a panel makes at start and presents to other
-- panels' internal surface (/internal/v1). Older panels neither write nor read it.

-- AlterTable
ALTER TABLE "panels" ADD COLUMN "internal_secret_hash" TEXT;
