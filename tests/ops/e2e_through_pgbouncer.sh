#!/usr/bin/env bash
# Runs the whole end-to-end suite (tests/e2e) with every proxy's store, and its --migrate, going
# through PgBouncer in transaction pooling mode: any session state the proxy assumed (prepared
# statements, session advisory locks, SET) would fail here. tests/run.sh starts the PgBouncer.
#
#   e2e_through_pgbouncer.sh E2E_TESTS_BINARY [gtest arguments...]
# Needs IDEMPROXY_TEST_PGBOUNCER_DSN; fails (never skips) without it.
set -euo pipefail

e2e_binary=${1:?usage: e2e_through_pgbouncer.sh E2E_TESTS_BINARY [gtest arguments...]}
shift
fail() { echo "e2e_through_pgbouncer: $*" >&2; exit 1; }

[ -n "${IDEMPROXY_TEST_PGBOUNCER_DSN:-}" ] ||
  fail "IDEMPROXY_TEST_PGBOUNCER_DSN is not set (tests/run.sh starts PgBouncer and sets it)"
[ -x "$e2e_binary" ] || fail "no e2e test binary at $e2e_binary"
command -v psql >/dev/null || fail "psql not found (Debian postgresql-client)"

# The DSN must lead to a PgBouncer in transaction mode, or this test proves nothing. Its console
# is the virtual database "pgbouncer" behind the same address.
console_dsn="$IDEMPROXY_TEST_PGBOUNCER_DSN dbname=pgbouncer"
pool_mode=$(psql "$console_dsn" -X -A -t -c 'SHOW CONFIG' 2>&1 | awk -F'|' '$1 == "pool_mode" { print $2 }') ||
  true
[ "$pool_mode" = transaction ] ||
  fail "the server at IDEMPROXY_TEST_PGBOUNCER_DSN is not a PgBouncer in transaction mode (pool_mode '$pool_mode')"

# PgBouncer drops the proxy's `options=-c synchronous_commit=on` (ignore_startup_parameters), so
# the pooler's server connections must set it themselves (connect_query; see README Durability).
synchronous_commit=$(psql "$IDEMPROXY_TEST_PGBOUNCER_DSN" -X -A -t -c 'SHOW synchronous_commit')
[ "$synchronous_commit" = on ] ||
  fail "sessions behind PgBouncer run with synchronous_commit=$synchronous_commit (expected on: connect_query)"

# Transactions PgBouncer has passed on for the database: they must grow, i.e. the suite really
# talked through it.
transactions() {
  psql "$console_dsn" -X -A -F'|' -c 'SHOW STATS' | awk -F'|' -v db="$1" '
    NR == 1 { for (i = 1; i <= NF; i++) if ($i == "total_xact_count") column = i; next }
    $1 == db && column { print $column }'
}
database=$(psql "$IDEMPROXY_TEST_PGBOUNCER_DSN" -X -A -t -c 'SELECT current_database()')
before=$(transactions "$database")

IDEMPROXY_TEST_PG_DSN=$IDEMPROXY_TEST_PGBOUNCER_DSN "$e2e_binary" --gtest_brief=1 "$@"

after=$(transactions "$database")
if [ "${after:-0}" -le "${before:-0}" ]; then
  fail "PgBouncer counted no transactions for database '$database' during the suite ($before -> $after)"
fi
echo "e2e_through_pgbouncer: suite passed; PgBouncer relayed $((after - before)) transactions (pool_mode $pool_mode)"
