#!/usr/bin/env bash
# Runs every test on a fresh Debian 12 with nothing set up: installs missing packages, builds,
# starts a private Postgres 15 cluster, PgBouncer in front of it (transaction pooling) and a Redis
# server on loopback (stopped again on exit), then runs ctest. Extra arguments go to ctest (e.g.
# -L e2e, -R Replay).
#
#   IDEMPROXY_BUILD_DIR   build directory (default: build)
#   IDEMPROXY_SKIP_BUILD=1  test what is already built (no apt, no build)
#   IDEMPROXY_TEST_KEEP_TMP=1  keep the work directory (server logs, test temp dirs) for a post-mortem
set -euo pipefail

IDEM_SCRIPT=tests/run.sh
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
# shellcheck source=SCRIPTDIR/../deploy/local-env.sh
source "$REPO/deploy/local-env.sh"

BUILD_DIR=${IDEMPROXY_BUILD_DIR:-build}
started=$SECONDS

if [ "${IDEMPROXY_SKIP_BUILD:-0}" != 1 ]; then
  idem_install_dependencies
  idem_build "$BUILD_DIR"
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/idemproxy-tests.XXXXXX")
IDEM_REDIS_PID=
IDEM_PGBOUNCER_PID=
cleanup() {
  local status=$?
  idem_stop_pid "$IDEM_REDIS_PID"
  idem_stop_pid "$IDEM_PGBOUNCER_PID"
  idem_stop_postgres "$WORK/pgdata"
  if [ "${IDEMPROXY_TEST_KEEP_TMP:-0}" = 1 ]; then
    idem_log "kept $WORK"
  else
    rm -rf "$WORK"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

idem_start_postgres "$WORK"
idem_start_pgbouncer "$WORK"
idem_start_redis "$WORK"
export IDEMPROXY_TEST_PG_DSN=$IDEMPROXY_PG_DSN
export IDEMPROXY_TEST_PG_DATA=$IDEMPROXY_PG_DATA
export IDEMPROXY_TEST_PG_CTL=$IDEMPROXY_PG_CTL
export IDEMPROXY_TEST_PG_LOG=$IDEMPROXY_PG_LOG
export IDEMPROXY_TEST_PG_PORT=$IDEMPROXY_PG_PORT
export IDEMPROXY_TEST_REDIS_PORT=$IDEMPROXY_REDIS_PORT
export IDEMPROXY_TEST_PGBOUNCER_DSN=$IDEMPROXY_PGBOUNCER_DSN
export TMPDIR=$WORK  # test temp dirs land here and go away with it

set +e
ctest --test-dir "$BUILD_DIR" --output-on-failure --no-tests=error -j 2 --timeout 300 "$@"
status=$?
set -e

elapsed=$((SECONDS - started))
if [ "$status" -eq 0 ]; then
  idem_log "all tests passed (${elapsed}s)"
else
  idem_log "TESTS FAILED: ctest exited with status $status (${elapsed}s)"
fi
exit "$status"
