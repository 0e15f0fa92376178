#pragma once
// Every statement idemrelay runs against the outbox, with $n parameters. The design behind the
// claim is explained in proxy/relay/README.md ("Order per aggregate").
#include <cstdint>

namespace idem::relay::sql {

// Claims up to $1 rows for the batch token $2 with a lease of $3 milliseconds, in one statement.
// Work is split by lane (002_lanes.sql: every aggregate hashes to one of 256 lanes):
//  1. lanes: up to 16 lanes nobody holds that have a row ready to publish (see `ready` below),
//     least recently served first, locked with SKIP LOCKED so concurrent claimers take others.
//     The free lanes are sorted first (256 rows at most) and probed for a ready row one by one
//     as step 2 asks for them, so a claim probes the lanes it uses, not all 256;
//  2. rows: the lanes' ready rows in id order, lane after lane, until $1 rows. The nested loop
//     stops there, so the claim reads the rows it takes (plus the few held back, below), not the
//     backlog; lanes it did not reach keep their turn (only lanes that gave rows are served).
//  3. the rows and the lanes that gave them are leased to $2 together; every settle (and the
//     release after a lost claim) hands both back.
// A row is ready when it is unpublished, unparked, due, unleased, and no earlier row of its
// aggregate is held back (parked, or not yet due: a failed row backing off, or one its writer
// delayed), found in outbox_aggregate_held_idx. Nothing else can be in the way: every row of an
// aggregate is in its lane, and the lane is ours, so no other batch holds any of them.
// A lane's rows are read with the statement's snapshot, which can be older than the lane's lock:
// another batch may have claimed and settled the lane in between (its rows published, or failed
// and backing off, which this snapshot does not show). So a lane is used only if its `version`
// (bumped by every claim, settle and release of it) as locked, which is the newest, equals the
// version this snapshot sees; otherwise it is left for the next claim.
// The OFFSET 0s keep each subquery a probe of its own index, whatever the statistics say (a
// never-analyzed or empty-when-analyzed outbox included): the planner cannot flatten them.
// The final UPDATE checks again that each row is still unpublished and unparked: a row it waited
// for (a settle held its lock) is re-read as that settle left it. (The lane's version already
// keeps a settle's rows from a claim whose snapshot predates it; this is the last word.) Written as
// COALESCE(...) IS NULL, not as the two IS NULLs: those match outbox_lane_waiting_idx's predicate,
// and on a never-analyzed outbox the planner then walked that whole index against `taken` (30,000
// rows x 500: 5.8 s) instead of probing the primary key once per taken row.
// Rows come back in no particular order; the caller sorts them by id. The W3C trace context the
// writer put in `headers` comes back on its own (NULL when absent), checked by the relay; the lane
// comes back for the settle.
inline constexpr const char* kClaim = R"sql(
WITH lanes AS MATERIALIZED (
  SELECT f.lane, f.version
  FROM (
    SELECT l.lane, l.version
    FROM outbox_lanes AS l
    WHERE l.claimed_until IS NULL OR l.claimed_until < now()
    ORDER BY l.served_at NULLS FIRST, l.lane
    OFFSET 0) AS f
  WHERE EXISTS (
    SELECT 1 FROM outbox AS o
    WHERE o.lane = f.lane AND o.published_at IS NULL AND o.parked_at IS NULL
      AND o.available_at <= now() AND (o.claimed_until IS NULL OR o.claimed_until < now())
      AND NOT EXISTS (
        SELECT 1 FROM outbox AS h
        WHERE h.aggregate_type = o.aggregate_type AND h.aggregate_id = o.aggregate_id AND h.id < o.id
          AND h.published_at IS NULL AND (h.parked_at IS NOT NULL OR h.attempts > 0 OR h.available_at > h.created_at)
          AND (h.parked_at IS NOT NULL OR h.available_at > now())
        OFFSET 0)
    OFFSET 0)
  LIMIT 16
  FOR UPDATE OF f SKIP LOCKED
),
taken AS (
  SELECT r.id, r.lane
  FROM lanes AS l
  CROSS JOIN LATERAL (
    SELECT o.id, o.lane FROM outbox AS o
    WHERE o.lane = l.lane AND o.published_at IS NULL AND o.parked_at IS NULL
      AND o.available_at <= now() AND (o.claimed_until IS NULL OR o.claimed_until < now())
      AND NOT EXISTS (
        SELECT 1 FROM outbox AS h
        WHERE h.aggregate_type = o.aggregate_type AND h.aggregate_id = o.aggregate_id AND h.id < o.id
          AND h.published_at IS NULL AND (h.parked_at IS NOT NULL OR h.attempts > 0 OR h.available_at > h.created_at)
          AND (h.parked_at IS NOT NULL OR h.available_at > now())
        OFFSET 0)
    ORDER BY o.id
    LIMIT $1) AS r
  WHERE l.version = (SELECT seen.version FROM outbox_lanes AS seen WHERE seen.lane = l.lane)
  LIMIT $1
),
leased_lanes AS (
  UPDATE outbox_lanes AS l
  SET claimed_by = $2, claimed_until = now() + ($3::float8 * interval '1 millisecond'), served_at = now(),
      version = l.version + 1
  WHERE l.lane IN (SELECT lane FROM taken)
)
UPDATE outbox AS o
SET claimed_by = $2, claimed_until = now() + ($3::float8 * interval '1 millisecond')
FROM taken AS t
WHERE o.id = t.id AND COALESCE(o.published_at, o.parked_at) IS NULL
RETURNING o.id, o.aggregate_type, o.aggregate_id, o.event_type, o.payload::text, o.headers::text,
          to_char(o.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), o.attempts,
          (extract(epoch FROM o.created_at) * 1000000)::int8, o.headers->>'traceparent', o.headers->>'tracestate',
          o.lane::int4
)sql";

// Settles a whole batch in one statement: $1 the batch token (the fence: a batch whose lease was
// taken over by another claim updates nothing), $2 every id of the batch, $3 the published ones,
// $4 the ones to retry, $5 the ones to park; the rest of $2 is released (lease dropped, nothing
// else). $6, $7, $8: the retried and parked rows' ids, delays (ms) and errors, in parallel. $9: the
// lanes of the batch's rows.
// The lanes first: every lane of the batch, locked in lane order and bumped (`version`), whoever
// holds it now, and handed back where this batch still holds it. A claim reads a lane with a
// snapshot that can predate this settle; the bump is what tells it the lane changed, so it leaves
// the lane alone instead of re-taking a row just published or parked. That matters most for a
// stale settle (its lease lapsed, another batch took the lane, took some of the rows and handed
// the lane back): it must still bump the lanes of the rows it changes. Locked before any row, as
// a claim locks its lanes before its rows, so a settle and a claim never wait on each other in
// opposite orders; in lane order, so two settles never do either. The outbox update reads the
// lanes through an InitPlan (ARRAY(...)), which runs before the first row is updated.
// The command tag counts outbox rows only.
// One table, no join: the rows are found by `o.id = ANY($2)` (index probes, or a scan where the
// planner knows that is cheaper), and each row's outcome by `= ANY` over a constant array, which
// Postgres evaluates with a hash table. A join of the rows with an unnest of the outcomes left the
// join order to statistics: on a never-analyzed outbox the planner scanned every unpublished row,
// or looped over the unnest once per row (quadratic: 48 ms for 500 rows). Delays and errors are
// looked up only for failed rows, which are few. EXPLAIN in proxy/relay/README.md ("Stale settles").
inline constexpr const char* kSettle = R"sql(
WITH locked AS MATERIALIZED (
  SELECT l.lane FROM outbox_lanes AS l
  WHERE l.lane = ANY($9::int4[]) OR l.claimed_by = $1
  ORDER BY l.lane
  FOR UPDATE
),
lanes AS (
  UPDATE outbox_lanes AS l
  SET claimed_by    = CASE WHEN l.claimed_by = $1 THEN NULL ELSE l.claimed_by END,
      claimed_until = CASE WHEN l.claimed_by = $1 THEN NULL ELSE l.claimed_until END,
      version       = l.version + 1
  FROM locked
  WHERE l.lane = locked.lane
  RETURNING l.lane
)
UPDATE outbox AS o SET
  published_at  = CASE WHEN o.id = ANY($3::int8[]) THEN now() END,
  attempts      = o.attempts + CASE WHEN o.id = ANY($4::int8[]) OR o.id = ANY($5::int8[]) THEN 1 ELSE 0 END,
  available_at  = CASE WHEN o.id = ANY($4::int8[])
                       THEN now() + ((SELECT f.delay_ms FROM unnest($6::int8[], $7::int8[]) AS f(id, delay_ms)
                                      WHERE f.id = o.id)::float8 * interval '1 millisecond')
                       ELSE o.available_at END,
  parked_at     = CASE WHEN o.id = ANY($5::int8[]) THEN now() END,
  last_error    = CASE WHEN o.id = ANY($4::int8[]) OR o.id = ANY($5::int8[])
                       THEN (SELECT f.error FROM unnest($6::int8[], $8::text[]) AS f(id, error) WHERE f.id = o.id)
                       ELSE o.last_error END,
  claimed_by    = NULL,
  claimed_until = NULL
WHERE o.id = ANY($2::int8[]) AND o.claimed_by = $1 AND o.published_at IS NULL
  AND o.lane = ANY (ARRAY(SELECT lane FROM lanes))
)sql";

// Hands back every row still leased to the batch token $1: the claim of that token went out and
// its reply was lost, so which rows it leased (if it committed at all) is unknown, but the token
// is. Fenced like kSettle: rows claimed since under another token, and published rows, are left
// alone. A claim leases rows and their lanes together, so the rows are found through the token's
// lanes (outbox_lane_waiting_idx): it reads those lanes' waiting rows, not the backlog. EXPLAIN in
// proxy/relay/README.md ("Lost replies").
inline constexpr const char* kReleaseClaim = R"sql(
WITH lanes AS (
  UPDATE outbox_lanes SET claimed_by = NULL, claimed_until = NULL, version = version + 1 WHERE claimed_by = $1
  RETURNING lane
)
UPDATE outbox SET claimed_by = NULL, claimed_until = NULL
WHERE lane = ANY (ARRAY(SELECT lane FROM lanes)) AND claimed_by = $1 AND published_at IS NULL AND parked_at IS NULL
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

// Rows held behind parked rows, for the gauge (read after the backlog while any row is parked):
// waiting rows with a parked row earlier in their aggregate. They are in the lanes of the parked
// rows (an aggregate is in one lane), so the statement reads each such lane's waiting rows once
// (outbox_lane_waiting_idx) and hash-joins them with the parked aggregates' first parked ids. The
// OFFSET 0 keeps the lanes' scan whole: flattened, the planner probed the lanes once per parked
// aggregate (5 aggregates: 5 times the buffers). At worst, parked rows in every lane, it reads the
// waiting backlog once, as kBacklog does. EXPLAIN in proxy/relay/README.md ("Parked rows").
inline constexpr const char* kHeldBehindParked = R"sql(
SELECT count(*)::int8
FROM (
  SELECT w.id, w.aggregate_type, w.aggregate_id FROM outbox AS w
  WHERE w.lane = ANY (ARRAY(
          SELECT DISTINCT p.lane FROM outbox AS p WHERE p.parked_at IS NOT NULL AND p.published_at IS NULL))
    AND w.published_at IS NULL AND w.parked_at IS NULL
  OFFSET 0) AS w
JOIN (
  SELECT p.aggregate_type, p.aggregate_id, min(p.id) AS first_id
  FROM outbox AS p
  WHERE p.parked_at IS NOT NULL AND p.published_at IS NULL
  GROUP BY p.aggregate_type, p.aggregate_id) AS f
  ON w.aggregate_type = f.aggregate_type AND w.aggregate_id = f.aggregate_id AND w.id > f.first_id
)sql";

// `--list-parked` and GET /admin/parked (relay/parked_rows.hpp): the first $1 parked rows by id
// (outbox_parked_idx), the number of parked rows in all (the window count runs before the LIMIT,
// so it reads every parked row's index entry and row: parked rows are few), and for each listed
// row the waiting rows of its aggregate after it, counted as in kHeldBehindParked: each lane of
// the listed rows read once.
inline constexpr const char* kListParked = R"sql(
WITH listed AS MATERIALIZED (
  SELECT o.id, o.aggregate_type, o.aggregate_id, o.event_type, o.attempts, o.last_error, o.parked_at, o.lane,
         count(*) OVER () AS total
  FROM outbox AS o
  WHERE o.parked_at IS NOT NULL AND o.published_at IS NULL
  ORDER BY o.id
  LIMIT $1),
behind AS (
  SELECT l.id, count(*) AS held
  FROM (
    SELECT w.id, w.aggregate_type, w.aggregate_id FROM outbox AS w
    WHERE w.lane = ANY (ARRAY(SELECT DISTINCT lane FROM listed)) AND w.published_at IS NULL AND w.parked_at IS NULL
    OFFSET 0) AS w
  JOIN listed AS l ON w.aggregate_type = l.aggregate_type AND w.aggregate_id = l.aggregate_id AND w.id > l.id
  GROUP BY l.id)
SELECT l.id, l.aggregate_type, l.aggregate_id, l.event_type, l.attempts, COALESCE(l.last_error, ''),
       to_char(l.parked_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), COALESCE(b.held, 0)::int8, l.total
FROM listed AS l LEFT JOIN behind AS b ON b.id = l.id
ORDER BY l.id
)sql";
// The same for aggregate ($2, $3) alone: its parked rows and its one lane.
inline constexpr const char* kListParkedOfAggregate = R"sql(
WITH listed AS MATERIALIZED (
  SELECT o.id, o.aggregate_type, o.aggregate_id, o.event_type, o.attempts, o.last_error, o.parked_at, o.lane,
         count(*) OVER () AS total
  FROM outbox AS o
  WHERE o.aggregate_type = $2 AND o.aggregate_id = $3 AND o.parked_at IS NOT NULL AND o.published_at IS NULL
  ORDER BY o.id
  LIMIT $1),
behind AS (
  SELECT l.id, count(*) AS held
  FROM (
    SELECT w.id, w.aggregate_type, w.aggregate_id FROM outbox AS w
    WHERE w.lane = ANY (ARRAY(SELECT DISTINCT lane FROM listed)) AND w.published_at IS NULL AND w.parked_at IS NULL
    OFFSET 0) AS w
  JOIN listed AS l ON w.aggregate_type = l.aggregate_type AND w.aggregate_id = l.aggregate_id AND w.id > l.id
  GROUP BY l.id)
SELECT l.id, l.aggregate_type, l.aggregate_id, l.event_type, l.attempts, COALESCE(l.last_error, ''),
       to_char(l.parked_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'), COALESCE(b.held, 0)::int8, l.total
FROM listed AS l LEFT JOIN behind AS b ON b.id = l.id
ORDER BY l.id
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
// Redrive by aggregate: every parked row of aggregate ($1, $2), found among the parked rows
// (outbox_parked_idx; they are few) or through outbox_aggregate_held_idx, as the planner prefers.
inline constexpr const char* kRedriveAggregate = R"sql(
UPDATE outbox SET parked_at = NULL, attempts = 0, available_at = now()
WHERE aggregate_type = $1 AND aggregate_id = $2 AND parked_at IS NOT NULL AND published_at IS NULL
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
inline constexpr const char* kRecordVersion =
    "INSERT INTO relay_schema_migrations (version, applied_at) VALUES ($1, now())";

}  // namespace idem::relay::sql
