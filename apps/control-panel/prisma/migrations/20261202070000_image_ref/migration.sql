-- Expand only (issue 22, images by digest): the image a deployment ran, pinned, as its agent reported it with
-- deploy.result running (`<repository>@sha256:…`, or the node's image id `sha256:…`). A rollback to the
-- deployment runs it, so a tag moved since cannot change what comes back. Null: not reported (an older agent,
-- or a deployment that never ran). Older panels neither write nor read it.

-- AlterTable
ALTER TABLE "deployments" ADD COLUMN "image_ref" TEXT;
