-- Expand only: a service's command and args (replace the image's ENTRYPOINT and CMD), its resource limits
-- and its named volumes. Older panels neither write nor read them; existing services get none.

-- AlterTable
ALTER TABLE "services" ADD COLUMN "command" JSONB;

-- AlterTable
ALTER TABLE "services" ADD COLUMN "args" JSONB;

-- AlterTable
ALTER TABLE "services" ADD COLUMN "resources" JSONB;

-- AlterTable
ALTER TABLE "services" ADD COLUMN "volumes" JSONB NOT NULL DEFAULT '[]';
