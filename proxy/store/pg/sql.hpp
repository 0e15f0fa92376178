#pragma once
// Every SQL statement of the Postgres store. Parameters are $n, sent in binary with explicit type
// OIDs (pg/statement.hpp). Sent as named prepared statements (one per connection, prepared on first
// use), or with prepared_statements off as unnamed statements: no session state, so they work
// behind PgBouncer in transaction pooling mode before 1.21. The data-path statements (claim, complete, release,
// mark_unknown) and the operator's (force_release, inspect) stay within what CockroachDB,
// YugabyteDB and Citus (distributed by scope) accept: single-row statements keyed by the
// primary key, no advisory locks. The sweep is a batch statement; see kSweepExpired.
#include <cstdint>

namespace idem::store::pg::sql {

// Columns every claim row has, in this order (record_codec.cpp decodes them).
enum ClaimColumn : int {
  claim_col_claimed = 0,       // bool
  claim_col_fingerprint,       // text
  claim_col_state,             // text
  claim_col_response_status,   // int4, NULL until completed
  claim_col_response_headers,  // bytea, NULL unless completed
  claim_col_response_body,     // bytea, NULL unless completed
  claim_col_lease_remaining,   // int8 milliseconds by the database clock, NULL unless in_flight
  claim_col_expires_in,        // int8 milliseconds until expires_at by the database clock
  claim_col_legacy,            // bool: the row is the live record under the legacy scope $9
  claim_column_count,
};

// Claim: ONE statement, ONE round trip, the primary key as arbiter.
// $1 scope text, $2 key text, $3 fingerprint text, $4 owner text, $5 ttl_ms int8,
// $6 lease_ms int8, $7 take_over_lapsed_lease bool, $8 unsettled_retention_ms int8 (the new
// in-flight record expires ttl + $8 from now: see ClaimRequest::unsettled_retention),
// $9 legacy_scope text or NULL (ClaimRequest::legacy_scope: a live record there is returned as
// the existing one and nothing is inserted; one more primary-key probe, none when NULL),
// $10 legacy_fingerprint text or NULL (ClaimRequest::legacy_fingerprint: a lapsed in-flight
// record carrying it is taken over like one carrying $3).
//
// The INSERT either creates the in-flight record, or replaces the conflicting one when it has
// expired (unless it is in flight with its lease running: its request may be executing, whatever
// the ttl it was claimed with), or (when asked) when it is an in-flight record of the same
// request whose lease lapsed;
// the conflicting row is locked while its WHERE is checked, so exactly one concurrent claim wins.
// Otherwise the CTE returns nothing and the second SELECT returns the live record.
//
// The race: when the conflicting row was inserted (or replaced) by a transaction that commits
// while this statement waits on it, the second SELECT reads this statement's older snapshot and
// finds no live row, so the statement returns NO row. The caller runs it again (bounded).
//
// Fences (kRelease): an in-flight record whose owner gave up on its claim's reply is taken over
// like an absent one, whatever its lease says: that claim committed after its proxy answered 503
// and never forwarded the request (a commit that waited on a synchronous standby, a claim queued
// in a pooler). And a claim whose own owner is already fenced inserts nothing (it ran after its
// proxy gave up on it): it returns the live record, or no row. Both probes are primary-key
// lookups in idempotency_fences, which holds a row only per lost claim reply.
inline constexpr const char* kClaim = R"sql(
WITH legacy AS (
  SELECT r.fingerprint, r.state, r.response_status, r.response_headers, r.response_body,
         (extract(epoch FROM r.lease_expires_at - now()) * 1000)::bigint AS lease_remaining_ms,
         (extract(epoch FROM r.expires_at - now()) * 1000)::bigint AS expires_in_ms
    FROM idempotency_records AS r
   WHERE r.scope = $9 AND r.key = $2
     AND (r.expires_at > now() OR (r.state = 'in_flight' AND r.lease_expires_at > now()))
), claimed AS (
  INSERT INTO idempotency_records AS r
    (scope, key, fingerprint, state, owner, created_at, lease_expires_at, expires_at)
  SELECT $1, $2, $3, 'in_flight', $4, now(),
         now() + $6 * interval '1 millisecond',
         now() + ($5 + $8) * interval '1 millisecond'
   WHERE NOT EXISTS (SELECT 1 FROM legacy)
     AND NOT EXISTS (SELECT 1 FROM idempotency_fences AS f WHERE f.scope = $1 AND f.key = $2 AND f.owner = $4)
  ON CONFLICT (scope, key) DO UPDATE
    SET fingerprint = excluded.fingerprint,
        state = excluded.state,
        owner = excluded.owner,
        created_at = excluded.created_at,
        lease_expires_at = excluded.lease_expires_at,
        completed_at = NULL,
        expires_at = excluded.expires_at,
        response_status = NULL,
        response_headers = NULL,
        response_body = NULL
    WHERE (r.expires_at <= now() AND NOT (r.state = 'in_flight' AND r.lease_expires_at > now()))
       OR ($7 AND r.state = 'in_flight' AND r.lease_expires_at <= now()
           AND (r.fingerprint = excluded.fingerprint OR r.fingerprint = $10))
       OR (r.state = 'in_flight'
           AND EXISTS (SELECT 1 FROM idempotency_fences AS f
                        WHERE f.scope = r.scope AND f.key = r.key AND f.owner = r.owner))
  RETURNING true AS claimed, r.fingerprint, r.state, r.response_status, r.response_headers,
            r.response_body, (extract(epoch FROM r.lease_expires_at - now()) * 1000)::bigint AS lease_remaining_ms,
            (extract(epoch FROM r.expires_at - now()) * 1000)::bigint AS expires_in_ms
)
SELECT claimed, fingerprint, state, response_status, response_headers, response_body, lease_remaining_ms,
       expires_in_ms, false AS legacy
  FROM claimed
UNION ALL
SELECT false, fingerprint, state, response_status, response_headers, response_body, lease_remaining_ms,
       expires_in_ms, true
  FROM legacy
UNION ALL
SELECT false, r.fingerprint, r.state, r.response_status, r.response_headers, r.response_body,
       (extract(epoch FROM r.lease_expires_at - now()) * 1000)::bigint,
       (extract(epoch FROM r.expires_at - now()) * 1000)::bigint, false
  FROM idempotency_records AS r
 WHERE r.scope = $1 AND r.key = $2
   AND (r.expires_at > now() OR (r.state = 'in_flight' AND r.lease_expires_at > now()))
   AND NOT EXISTS (SELECT 1 FROM claimed)
   AND NOT EXISTS (SELECT 1 FROM legacy)
)sql";

// Complete: the in-flight record owned by $3 takes its final state and response. 0 rows: not ours.
// Idempotent for its owner: run again after a lost reply, it finds the record already in state $4
// (owner tokens are unique per claim, so that is this very completion) and rewrites the same
// values, keeping the first completed_at. The record expires $8 (its ttl) after its claim: the
// claim may have set a later expiry for the case that nobody ever completes it (never a later one
// than the claim's: LEAST, so a completion cannot lengthen a record's life).
// $1 scope text, $2 key text, $3 owner text, $4 state text, $5 status int4, $6 headers bytea,
// $7 body bytea (NULL headers and body for too_large), $8 ttl_ms int8.
inline constexpr const char* kComplete = R"sql(
UPDATE idempotency_records
   SET state = $4, response_status = $5, response_headers = $6, response_body = $7,
       completed_at = coalesce(completed_at, now()), lease_expires_at = NULL,
       expires_at = LEAST(expires_at, created_at + $8 * interval '1 millisecond')
 WHERE scope = $1 AND key = $2 AND owner = $3 AND state IN ('in_flight', $4)
)sql";

// Columns of a release row.
enum ReleaseColumn : int {
  release_col_released = 0,  // bool: the owner's in-flight record was deleted
  release_column_count,
};

// Release: deletes the in-flight record owned by $3 (released = true). When there is none
// (released = false: not ours, or already deleted by an earlier run of this release), it fences
// the owner instead: idempotency_fences gets (scope, key, owner), so that the claim this owner
// gave up on can never hold the key, even if it commits later. "Nothing deleted" does not prove
// that the claim never committed: its INSERT may still be in progress, invisible to this DELETE
// (a commit waiting for a synchronous standby, a statement queued in a pooler); every claim
// treats an in-flight record of a fenced owner as absent (kClaim). The fence lives $4 ms, the
// longest an in-flight record can live (ttl + unknown_retention), counted from now, after the
// claim began. A fence left after an ordinary lost release reply costs one row until the sweep.
// $1 scope text, $2 key text, $3 owner text, $4 fence_ms int8.
inline constexpr const char* kRelease = R"sql(
WITH released AS (
  DELETE FROM idempotency_records
   WHERE scope = $1 AND key = $2 AND owner = $3 AND state = 'in_flight'
  RETURNING 1
), fenced AS (
  INSERT INTO idempotency_fences (scope, key, owner, expires_at)
  SELECT $1, $2, $3, now() + $4 * interval '1 millisecond'
   WHERE NOT EXISTS (SELECT 1 FROM released)
  ON CONFLICT (scope, key, owner) DO NOTHING
)
SELECT EXISTS (SELECT 1 FROM released)
)sql";

// Mark unknown: the in-flight record owned by $3 becomes `unknown`, which no claim takes over
// (take-over applies to in_flight only); it stays until force_release or its expiry, at least $4 ms
// after its claim (ttl + unknown_retention; a lock-mode claim set that already). 0 rows: not ours.
// Idempotent for its owner, like kComplete: a second run finds it unknown and sets the same values.
// $1 scope text, $2 key text, $3 owner text, $4 expires_after_ms int8.
inline constexpr const char* kMarkUnknown = R"sql(
UPDATE idempotency_records
   SET state = 'unknown', lease_expires_at = NULL,
       expires_at = GREATEST(expires_at, created_at + $4 * interval '1 millisecond')
 WHERE scope = $1 AND key = $2 AND owner = $3 AND state IN ('in_flight', 'unknown')
)sql";

// Columns of a force-release row, in this order.
enum ForceReleaseColumn : int {
  force_release_col_released = 0,     // bool: the record was deleted
  force_release_col_lease_remaining,  // int8 milliseconds, NULL unless in flight
  force_release_column_count,
};

// Force release (operator): deletes the live record whatever its owner, if it is unknown or in
// flight with its lease lapsed. An in-flight record within its lease is locked and left alone
// (its request may be executing), and the row says how long its lease still runs. No row:
// absent, expired, or completed/too_large. Keyed by the primary key: one row at most, locked
// for the statement, so a claim cannot slip in between the check and the delete.
// $1 scope text, $2 key text.
inline constexpr const char* kForceRelease = R"sql(
WITH target AS (
  SELECT scope, key, state, lease_expires_at
    FROM idempotency_records
   WHERE scope = $1 AND key = $2 AND state IN ('in_flight', 'unknown') AND expires_at > now()
     FOR UPDATE
), released AS (
  DELETE FROM idempotency_records AS r
   USING target AS t
   WHERE r.scope = t.scope AND r.key = t.key
     AND (t.state = 'unknown' OR t.lease_expires_at <= now())
  RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM released),
       CASE WHEN t.state = 'in_flight' THEN (extract(epoch FROM t.lease_expires_at - now()) * 1000)::bigint END
  FROM target AS t
)sql";

// Sweep: deletes at most $1 expired records, oldest first, and reports how many (command tag);
// and, in the same statement, at most $1 expired fences (not counted: there are few, one per
// lost claim reply).
// The inner SELECT walks idempotency_records_expires_at_idx from its start and stops after $1
// rows; SKIP LOCKED passes over rows another sweeper or a claim holds, so concurrent sweepers
// never wait on each other and never delete a row twice. The outer DELETE finds the locked rows
// again by primary key ((scope, key) rather than ctid, which only PostgreSQL has): a nested loop
// of primary-key probes. The planner switches to a hash join over a sequential scan only when
// the batch is a large part of the table (PostgreSQL 15, default costs: at 1,000 of 100,000 rows,
// not at 500), so keep batches in the hundreds. A claim replacing an expired row the sweep holds
// waits for the sweep, then inserts. The fences go the same way through their expiry index.
// $1 batch int8.
inline constexpr const char* kSweepExpired = R"sql(
WITH fences AS (
  DELETE FROM idempotency_fences
   WHERE (scope, key, owner) IN (
     SELECT scope, key, owner
       FROM idempotency_fences
      WHERE expires_at <= now()
      ORDER BY expires_at
      LIMIT $1
        FOR UPDATE SKIP LOCKED)
)
DELETE FROM idempotency_records
 WHERE (scope, key) IN (
   SELECT scope, key
     FROM idempotency_records
    WHERE expires_at <= now()
    ORDER BY expires_at
    LIMIT $1
      FOR UPDATE SKIP LOCKED)
)sql";

// Columns of an inspect row, in this order (record_codec.cpp decodes them).
enum InspectColumn : int {
  inspect_col_fingerprint = 0,   // text
  inspect_col_state,             // text
  inspect_col_created_at,        // int8 Unix epoch milliseconds
  inspect_col_lease_expires_at,  // int8 Unix epoch milliseconds, NULL unless in_flight
  inspect_col_completed_at,      // int8 Unix epoch milliseconds, NULL until completed
  inspect_col_expires_at,        // int8 Unix epoch milliseconds
  inspect_col_response_status,   // int4, NULL until completed
  inspect_col_body_bytes,        // int8, NULL unless completed
  inspect_column_count,
};

// Inspect (operator): the live record without its stored headers and body. No row: absent or
// expired. $1 scope text, $2 key text.
inline constexpr const char* kInspect = R"sql(
SELECT fingerprint, state,
       (extract(epoch FROM created_at) * 1000)::bigint,
       (extract(epoch FROM lease_expires_at) * 1000)::bigint,
       (extract(epoch FROM completed_at) * 1000)::bigint,
       (extract(epoch FROM expires_at) * 1000)::bigint,
       response_status,
       octet_length(response_body)::bigint
  FROM idempotency_records
 WHERE scope = $1 AND key = $2 AND expires_at > now()
)sql";

// Migrations (blocking libpq, one transaction; see pg/migrate.cpp and migrations.cpp).
// Serializes concurrent migrators until the transaction ends. The key is arbitrary but fixed:
// the bytes of "idemprox".
inline constexpr std::int64_t kMigrationLockKey = 0x6964656d70726f78;
inline constexpr const char* kCreateSchemaMigrations = R"sql(
CREATE TABLE IF NOT EXISTS schema_migrations (
  version    integer     PRIMARY KEY,
  applied_at timestamptz NOT NULL DEFAULT now()
)
)sql";
inline constexpr const char* kAppliedVersions = "SELECT version FROM schema_migrations ORDER BY version";
inline constexpr const char* kRecordMigration =
    "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, now())";

}  // namespace idem::store::pg::sql
