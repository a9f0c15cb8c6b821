-- Expand only: fleet-page cookies signed out before they expire (issue 25). A panel of the previous release
-- does not read it (its cookies carry no id to sign out); rows past their expiry are deleted on the next sign-out.

-- CreateTable
CREATE TABLE "dashboard_sign_outs" (
    "cookie_id" TEXT NOT NULL,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "dashboard_sign_outs_pkey" PRIMARY KEY ("cookie_id")
);
