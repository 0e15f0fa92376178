-- Migration 002: fences against claims that commit after their proxy gave up on them.
-- Applied by `idemproxy --migrate`; safe to re-run by hand. Apply it before the proxies that
-- release with fences start (a rolling upgrade: migrate, then roll out): their claims and
-- releases name this table.
--
-- When a claim's reply is lost, the proxy answers 503 and releases the claim by its owner token.
-- If the release finds no record to delete, the claim may still commit later (its commit waiting
-- on a synchronous standby, the statement queued in a pooler), so the release records the owner
-- here; every claim treats an in-flight record of a fenced owner as absent. One row per lost
-- claim reply, deleted by the reaper once expired.

CREATE TABLE IF NOT EXISTS idempotency_fences (
  scope      text        NOT NULL,
  key        text        NOT NULL,
  owner      text        NOT NULL,  -- the owner token of the claim given up on
  expires_at timestamptz NOT NULL,  -- outlives any in-flight record the claim could have made
  PRIMARY KEY (scope, key, owner)
);

-- For the reaper.
CREATE INDEX IF NOT EXISTS idempotency_fences_expires_at_idx ON idempotency_fences (expires_at);
