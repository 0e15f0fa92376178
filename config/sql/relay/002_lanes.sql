-- idemrelay migration 002: lanes, so that a claim costs O(batch) whatever the backlog.
--
-- Every aggregate hashes to one of 256 lanes (a stored generated column: the writer's INSERT is
-- unchanged). A claim leases whole lanes (outbox_lanes, SKIP LOCKED) and takes their rows in id
-- order: while one batch holds a lane, no other claimer looks at its rows, so order per aggregate
-- needs no probe of other claimers' leases, and a claim walks the rows it takes, not the backlog.
-- See proxy/relay/README.md ("Order per aggregate", "Claim cost").
--
-- Adding the column rewrites the table under an ACCESS EXCLUSIVE lock: stop the relays and run it
-- while the outbox is small (or in a quiet minute); writers wait for it.

ALTER TABLE outbox ADD COLUMN IF NOT EXISTS lane smallint
  GENERATED ALWAYS AS ((hashtextextended(aggregate_type || ' ' || aggregate_id, 0) & 255)::smallint) STORED;

-- One row per lane. served_at orders the claims round robin over the lanes with work.
CREATE TABLE IF NOT EXISTS outbox_lanes (
  lane          smallint    PRIMARY KEY,
  claimed_by    text,                     -- token of the relay batch holding the lane
  claimed_until timestamptz,              -- that batch's lease (the same as its rows')
  served_at     timestamptz,              -- last claim that took rows from the lane
  version       bigint      NOT NULL DEFAULT 0  -- + 1 by every claim, settle and release of the lane
) WITH (
  -- Every claim and settle updates a few of these 256 rows: keep the updates HOT and vacuum often.
  fillfactor = 50,
  autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 1000
);
INSERT INTO outbox_lanes (lane) SELECT g FROM generate_series(0, 255) AS g ON CONFLICT DO NOTHING;

-- A claim walks one lane's waiting rows in id order...
CREATE INDEX IF NOT EXISTS outbox_lane_waiting_idx ON outbox (lane, id)
  WHERE published_at IS NULL AND parked_at IS NULL;
-- ...and checks each row's aggregate for an earlier row that may hold it back: parked, failed
-- (backing off), or delayed by its writer (available_at set later than created_at). Few rows, so a
-- small index; whether such a row holds back *now* (available_at > now()) the claim checks.
CREATE INDEX IF NOT EXISTS outbox_aggregate_held_idx ON outbox (aggregate_type, aggregate_id, id)
  WHERE published_at IS NULL AND (parked_at IS NOT NULL OR attempts > 0 OR available_at > created_at);
-- The per-aggregate index of 001 served the old claim only.
DROP INDEX IF EXISTS outbox_aggregate_unpublished_idx;
