#!/usr/bin/env bash
# Runs every test on a fresh Debian 12 with nothing set up: installs missing packages, builds,
# starts a private Postgres 15 cluster, PgBouncer in front of it (transaction pooling) and a Redis
# server on loopback (stopped again on exit), then runs the stages on those servers:
#   plain  the whole ctest suite on the normal build
#   asan   the suite again built with ASan+UBSan;  tsan  the suite again built with TSan
#   fuzz   each libFuzzer target for a bounded time          (asan, tsan, fuzz: tests/sanitizers.sh)
#   tidy   clang-format (.clang-format) and clang-tidy over proxy/ (tests/lint/), on the plain build's compile commands
# Extra arguments go to the plain stage's ctest (e.g. -L e2e, -R Replay) and make the run a
# focused one: the plain stage only, unless IDEMPROXY_STAGES says otherwise.
#
#   IDEMPROXY_BUILD_DIR   build directory (default: build)
#   IDEMPROXY_SKIP_BUILD=1  test what is already built (no apt, no build)
#   IDEMPROXY_TEST_KEEP_TMP=1  keep the work directory (server logs, test temp dirs) for a post-mortem
#   IDEMPROXY_TEST_JOBS   tests run at once (default 3: most tests wait on leases, timers and
#                         child processes, so three keep two cores busier than two; measured on
#                         -L e2e-failure: 77 s with 2, 54 s with 3)
#   IDEMPROXY_STAGES      stages to run, in order (default: "plain asan tsan fuzz tidy")
#   IDEMPROXY_SKIP_SANITIZERS=1  leave out asan and tsan;  IDEMPROXY_SKIP_FUZZ=1  leave out fuzz
set -euo pipefail

IDEM_SCRIPT=tests/run.sh
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
# shellcheck source=SCRIPTDIR/../deploy/local-env.sh
source "$REPO/deploy/local-env.sh"

# shellcheck source=SCRIPTDIR/sanitizers.sh
source "$REPO/tests/sanitizers.sh"

BUILD_DIR=${IDEMPROXY_BUILD_DIR:-build}
IDEM_TEST_JOBS=${IDEMPROXY_TEST_JOBS:-3}
started=$SECONDS

if [ -n "${IDEMPROXY_STAGES:-}" ]; then
  read -r -a stages <<<"$IDEMPROXY_STAGES"
elif [ "$#" -gt 0 ]; then
  stages=(plain)
else
  stages=(plain asan tsan fuzz tidy)
fi
selected=()
for stage in "${stages[@]}"; do
  case $stage in
    plain) selected+=("$stage") ;;
    asan | tsan) if [ "${IDEMPROXY_SKIP_SANITIZERS:-0}" != 1 ]; then selected+=("$stage"); fi ;;
    fuzz) if [ "${IDEMPROXY_SKIP_FUZZ:-0}" != 1 ]; then selected+=("$stage"); fi ;;
    tidy) selected+=("$stage") ;;
    *) idem_die "unknown stage '$stage' in IDEMPROXY_STAGES (plain, asan, tsan, fuzz, tidy)" ;;
  esac
done
[ "${#selected[@]}" -gt 0 ] || idem_die "no stage left to run"

if [ "${IDEMPROXY_SKIP_BUILD:-0}" != 1 ]; then
  idem_install_dependencies
  if [[ " ${selected[*]} " == *" plain "* ]]; then
    idem_build "$BUILD_DIR"
  fi
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

idem_stage_plain() {
  ctest --test-dir "$BUILD_DIR" --output-on-failure --no-tests=error -j "$IDEM_TEST_JOBS" --timeout 300 "$@"
}

idem_stage_tidy() {
  if [ "${IDEMPROXY_SKIP_BUILD:-0}" != 1 ]; then
    local IDEM_PACKAGES=(clang-tidy clang-format jq)
    idem_install_dependencies
    # Configured (a current compile_commands.json) and built (generated headers) even when the
    # plain stage did not run; after it, a no-op.
    idem_build "$BUILD_DIR"
  fi
  local status=0
  bash "$REPO/tests/lint/clang-format.sh" || status=1
  bash "$REPO/tests/lint/clang-tidy.sh" "$BUILD_DIR" || status=1
  return $status
}

# Every selected stage runs even after one fails; the summary says which failed.
status=0
summary=()
for stage in "${selected[@]}"; do
  stage_started=$SECONDS
  idem_log "stage $stage"
  set +e
  if [ "$stage" = plain ]; then
    (set -e; idem_stage_plain "$@")
  else
    (set -e; "idem_stage_$stage")
  fi
  stage_status=$?
  set -e
  [ "$stage_status" -eq 0 ] || status=1
  summary+=("$stage: $([ "$stage_status" -eq 0 ] && echo passed || echo "FAILED ($stage_status)") in $((SECONDS - stage_started))s")
done

elapsed=$((SECONDS - started))
for line in "${summary[@]}"; do idem_log "$line"; done
if [ "$status" -eq 0 ]; then
  idem_log "all tests passed (${elapsed}s)"
else
  idem_log "TESTS FAILED (${elapsed}s)"
fi
exit "$status"
