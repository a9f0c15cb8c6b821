-- Expand only: tokens may expire (issue 24).

-- AlterTable
ALTER TABLE "api_tokens" ADD COLUMN     "expires_at" TIMESTAMP(3);
