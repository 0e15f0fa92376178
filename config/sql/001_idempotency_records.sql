-- Migration 001: the idempotency record table.
-- Applied by `idemproxy --migrate` (which records it in schema_migrations); safe to re-run by hand.
--
-- Portable on purpose: plain DDL that PostgreSQL, CockroachDB and YugabyteDB accept. On Citus,
-- distribute by scope after this migration: SELECT create_distributed_table('idempotency_records', 'scope');
-- (the primary key starts with scope, and every statement on the data path filters on it).

CREATE TABLE IF NOT EXISTS idempotency_records (
  scope            text        NOT NULL,  -- route name + hash of the route's scope headers
  key              text        NOT NULL,  -- the client's Idempotency-Key
  fingerprint      text        NOT NULL,  -- versioned request fingerprint ("v1:...")
  state            text        NOT NULL
                   CHECK (state IN ('in_flight', 'completed', 'too_large', 'unknown')),
  owner            text        NOT NULL,  -- random token of the claim that holds the record
  created_at       timestamptz NOT NULL,
  lease_expires_at timestamptz,           -- in_flight only: when another claim may take over
  completed_at     timestamptz,
  expires_at       timestamptz NOT NULL,  -- past this instant the record counts as absent
  response_status  integer,               -- completed and too_large
  response_headers bytea,                 -- completed: "Name: value\r\n" per field
  response_body    bytea,                 -- completed: raw bytes
  PRIMARY KEY (scope, key)
);

-- For the reaper that deletes expired records in batches.
CREATE INDEX IF NOT EXISTS idempotency_records_expires_at_idx ON idempotency_records (expires_at);
