-- idemrelay migration 001: the outbox table, its indexes and the NOTIFY trigger.
-- Applied by `idemrelay --config FILE --migrate` (recorded in relay_schema_migrations).
--
-- The legacy service INSERTs one row per event in the same transaction as its domain write
-- (see proxy/relay/README.md, "Writing to the outbox"); idemrelay does everything else.

CREATE TABLE IF NOT EXISTS outbox (
  id             bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,  -- the event_id downstream
  aggregate_type text        NOT NULL,
  aggregate_id   text        NOT NULL,                    -- rows of one aggregate are published in id order
  event_type     text        NOT NULL,
  payload        jsonb       NOT NULL,
  headers        jsonb       NOT NULL DEFAULT '{}'::jsonb,
  created_at     timestamptz NOT NULL DEFAULT now(),
  available_at   timestamptz NOT NULL DEFAULT now(),      -- not before: the retry backoff
  published_at   timestamptz,                             -- set once the sink acknowledged the row
  attempts       integer     NOT NULL DEFAULT 0,          -- failed publishes so far
  last_error     text,                                    -- why the last publish failed
  parked_at      timestamptz,                             -- dead letter: max_attempts reached or poison
  claimed_by     text,                                    -- token of the relay batch holding the row
  claimed_until  timestamptz                              -- that batch's lease
) WITH (
  -- Claims only touch unindexed columns: leave room on each page so they stay HOT updates.
  fillfactor = 80,
  -- A busy outbox churns: vacuum after ~2% of the rows changed rather than the default 20%.
  autovacuum_vacuum_scale_factor = 0.02,
  autovacuum_vacuum_insert_scale_factor = 0.02,
  autovacuum_analyze_scale_factor = 0.02
);

-- The claim walks unpublished rows in id order...
CREATE INDEX IF NOT EXISTS outbox_unpublished_idx ON outbox (id) WHERE published_at IS NULL;
-- ...and looks up each candidate's aggregate: its head row and anything blocking it.
CREATE INDEX IF NOT EXISTS outbox_aggregate_unpublished_idx
  ON outbox (aggregate_type, aggregate_id, id) WHERE published_at IS NULL;
-- Retention deletes the oldest published rows first.
CREATE INDEX IF NOT EXISTS outbox_published_at_idx ON outbox (published_at) WHERE published_at IS NOT NULL;
-- Dead letters are few; the index makes `--redrive-all` and the parked gauge cheap.
CREATE INDEX IF NOT EXISTS outbox_parked_idx ON outbox (id) WHERE parked_at IS NOT NULL AND published_at IS NULL;

-- One NOTIFY per inserting statement (not per row): wakes idle relays at once. Delivered at
-- commit, so a relay never wakes for a row it cannot see yet. Drop the trigger to rely on
-- polling alone (relay.poll_interval).
CREATE OR REPLACE FUNCTION outbox_notify_relay() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
  PERFORM pg_notify('idemrelay_outbox', '');
  RETURN NULL;
END
$fn$;

DROP TRIGGER IF EXISTS outbox_notify_relay ON outbox;
CREATE TRIGGER outbox_notify_relay AFTER INSERT ON outbox
  FOR EACH STATEMENT EXECUTE FUNCTION outbox_notify_relay();
