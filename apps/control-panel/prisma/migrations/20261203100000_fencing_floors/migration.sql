-- Issue 39: the fencing floor per database timeline. A panel that reaches a server on a new timeline (a
-- promoted standby) writes here the highest node-ownership generation it holds; every later claim takes a
-- generation above the highest floor, so commits lost in the promotion cannot hand a node to two panels.
CREATE TABLE "fencing_floors" (
    "timeline" INTEGER NOT NULL,
    "floor" BIGINT NOT NULL,
    "raised_at" TIMESTAMPTZ(3) NOT NULL,

    CONSTRAINT "fencing_floors_pkey" PRIMARY KEY ("timeline")
);
