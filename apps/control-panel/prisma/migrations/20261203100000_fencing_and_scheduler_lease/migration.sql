-- Issue 39: the fencing floor per database timeline. A panel that reaches a server on a new timeline (a
-- promoted standby) writes here the highest node-ownership generation it holds; every later claim takes a
-- generation above the highest floor, so commits lost in the promotion cannot hand a node to two panels;
-- the scheduler's epoch the same way (scheduler_epoch: the epoch a panel held as the scheduler).
CREATE TABLE "fencing_floors" (
    "timeline" INTEGER NOT NULL,
    "floor" BIGINT NOT NULL,
    "scheduler_epoch" BIGINT NOT NULL DEFAULT 0,
    "raised_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "fencing_floors_pkey" PRIMARY KEY ("timeline")
);

-- Issue 36: one scheduler among several panels. One row: the panel holding the lease, and an epoch that only
-- grows (a new holder takes the next one, above every fencing floor); every scheduler write is conditional on it.
CREATE TABLE "scheduler_lease" (
    "id" INTEGER NOT NULL DEFAULT 1,
    "holder" TEXT NOT NULL,
    "epoch" BIGINT NOT NULL,
    "lease_until" TIMESTAMPTZ(3) NOT NULL,
    "renewed_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "scheduler_lease_pkey" PRIMARY KEY ("id")
);
