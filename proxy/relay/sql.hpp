#pragma once
// Every statement idemrelay runs against the outbox, with $n parameters. The design behind the
// claim is explained in proxy/relay/README.md ("Order per aggregate").
#include <cstdint>

namespace idem::relay::sql {

// Claims up to $1 rows for the batch token $2 with a lease of $3 milliseconds, in one short
// transaction (one statement). A row is claimable only as part of its aggregate's prefix:
//  1. candidates: unpublished, unparked, due (available_at), unleased rows with no blocked row
//     (parked, backing off, leased) before them in their aggregate, oldest first, locked with
//     SKIP LOCKED so concurrent claimers split the work instead of waiting;
//  2. a candidate is kept only when it holds the same rank among the batch's rows of its
//     aggregate as among all the aggregate's unpublished rows: the batch then holds, per
//     aggregate, a prefix starting at the aggregate's oldest unpublished row. A row skipped
//     because another claimer is taking it right now (locked, its lease not yet committed)
//     breaks the rank match, so nothing after it is taken.
// Rows come back in no particular order; the caller sorts them by id.
// The OFFSET 0 keeps the NOT EXISTS a per-candidate probe of the (aggregate, id) index: without
// it the planner turns it into an anti-join over a sequential scan of the whole table, retained
// published rows included, because it expects almost no blocked rows.
inline constexpr const char* kClaim = R"sql(
WITH candidates AS (
  SELECT o.id, o.aggregate_type, o.aggregate_id
  FROM outbox AS o
  WHERE o.published_at IS NULL
    AND o.parked_at IS NULL
    AND o.available_at <= now()
    AND (o.claimed_until IS NULL OR o.claimed_until < now())
    AND NOT EXISTS (
      SELECT 1 FROM outbox AS b
      WHERE b.aggregate_type = o.aggregate_type AND b.aggregate_id = o.aggregate_id
        AND b.published_at IS NULL AND b.id < o.id
        AND (b.parked_at IS NOT NULL OR b.available_at > now() OR b.claimed_until >= now())
      OFFSET 0)
  ORDER BY o.id
  LIMIT $1
  FOR UPDATE OF o SKIP LOCKED
),
ranked AS (
  SELECT c.id, row_number() OVER (PARTITION BY c.aggregate_type, c.aggregate_id ORDER BY c.id) AS rank
  FROM candidates AS c
),
heads AS (
  SELECT first.id, row_number() OVER (PARTITION BY a.aggregate_type, a.aggregate_id ORDER BY first.id) AS rank
  FROM (SELECT aggregate_type, aggregate_id, count(*) AS n FROM candidates GROUP BY aggregate_type, aggregate_id) AS a
  CROSS JOIN LATERAL (
    SELECT b.id FROM outbox AS b
    WHERE b.aggregate_type = a.aggregate_type AND b.aggregate_id = a.aggregate_id AND b.published_at IS NULL
    ORDER BY b.id
    LIMIT a.n) AS first
)
UPDATE outbox AS o
SET claimed_by = $2, claimed_until = now() + ($3::float8 * interval '1 millisecond')
FROM ranked AS r JOIN heads AS h ON h.id = r.id AND h.rank = r.rank
WHERE o.id = r.id
RETURNING o.id, o.aggregate_type, o.aggregate_id, o.event_type, o.payload::text, o.headers::text,
          to_char(o.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), o.attempts,
          (extract(epoch FROM o.created_at) * 1000000)::int8
)sql";

// Outcome codes of kSettle, per row.
inline constexpr std::int32_t kOutcomeReleased = 0;   // not attempted: the lease is dropped, nothing else
inline constexpr std::int32_t kOutcomePublished = 1;
inline constexpr std::int32_t kOutcomeRetry = 2;      // attempts + 1, available_at = now + delay
inline constexpr std::int32_t kOutcomeParked = 3;     // attempts + 1, parked (dead letter)

// Settles a whole batch in one statement: $1 the batch token (the fence: a batch whose lease was
// taken over by another claim updates nothing), then parallel arrays id, outcome, delay (ms),
// error text.
inline constexpr const char* kSettle = R"sql(
UPDATE outbox AS o SET
  published_at  = CASE WHEN u.outcome = 1 THEN now() END,
  attempts      = o.attempts + CASE WHEN u.outcome IN (2, 3) THEN 1 ELSE 0 END,
  available_at  = CASE WHEN u.outcome = 2 THEN now() + (u.delay_ms::float8 * interval '1 millisecond')
                       ELSE o.available_at END,
  parked_at     = CASE WHEN u.outcome = 3 THEN now() END,
  last_error    = CASE WHEN u.outcome IN (2, 3) THEN u.error ELSE o.last_error END,
  claimed_by    = NULL,
  claimed_until = NULL
FROM unnest($2::int8[], $3::int4[], $4::int8[], $5::text[]) AS u(id, outcome, delay_ms, error)
WHERE o.id = u.id AND o.claimed_by = $1 AND o.published_at IS NULL
)sql";

// Hands back every row still leased to the batch token $1: the claim of that token went out and
// its reply was lost, so which rows it leased (if it committed at all) is unknown, but the token
// is. Fenced like kSettle: rows claimed since under another token, and published rows, are left
// alone. It walks the unpublished rows (outbox_unpublished_idx), not the retained published ones;
// there is no index on claimed_by on purpose: claims then stay HOT updates (001_outbox.sql), and
// this runs only after a lost claim reply. EXPLAIN in proxy/relay/README.md ("Lost replies").
inline constexpr const char* kReleaseClaim = R"sql(
UPDATE outbox SET claimed_by = NULL, claimed_until = NULL
WHERE claimed_by = $1 AND published_at IS NULL
)sql";

// Retention: up to $2 published rows older than $1 milliseconds, oldest first.
inline constexpr const char* kDeletePublished = R"sql(
DELETE FROM outbox WHERE id IN (
  SELECT id FROM outbox
  WHERE published_at < now() - ($1::float8 * interval '1 millisecond')
  ORDER BY published_at
  LIMIT $2
  FOR UPDATE SKIP LOCKED)
)sql";

// Backlog for metrics and logs: rows waiting (not parked), parked rows, age of the oldest waiting
// row in milliseconds (0 when none).
inline constexpr const char* kBacklog = R"sql(
SELECT count(*) FILTER (WHERE parked_at IS NULL),
       count(*) FILTER (WHERE parked_at IS NOT NULL),
       COALESCE((extract(epoch FROM now() - min(created_at) FILTER (WHERE parked_at IS NULL)) * 1000)::int8, 0)
FROM outbox WHERE published_at IS NULL
)sql";

inline constexpr const char* kListen = "LISTEN idemrelay_outbox";

// Redrive (command line): un-park one row or every parked row; attempts restart from 0.
inline constexpr const char* kRedriveOne = R"sql(
UPDATE outbox SET parked_at = NULL, attempts = 0, available_at = now()
WHERE id = $1 AND parked_at IS NOT NULL AND published_at IS NULL
RETURNING id
)sql";
inline constexpr const char* kRedriveAll = R"sql(
UPDATE outbox SET parked_at = NULL, attempts = 0, available_at = now()
WHERE parked_at IS NOT NULL AND published_at IS NULL
RETURNING id
)sql";
inline constexpr const char* kWakeRelays = "SELECT pg_notify('idemrelay_outbox', '')";

// Migrations: relay versions live in their own table, beside idemproxy's schema_migrations.
inline constexpr std::int64_t kMigrationLockKey = 0x6964656d72656c61;  // "idemrela"
inline constexpr const char* kCreateVersionsTable = R"sql(
CREATE TABLE IF NOT EXISTS relay_schema_migrations (
  version    integer     PRIMARY KEY,
  applied_at timestamptz NOT NULL DEFAULT now()
)
)sql";
inline constexpr const char* kAppliedVersions = "SELECT version FROM relay_schema_migrations ORDER BY version";
inline constexpr const char* kRecordVersion = "INSERT INTO relay_schema_migrations (version, applied_at) VALUES ($1, now())";

}  // namespace idem::relay::sql
