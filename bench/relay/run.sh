#!/usr/bin/env bash
# The idemrelay benchmark, one command: builds idemrelay and idemrelay-bench, starts a private
# Postgres 15 and Redis on loopback (stopped on exit), runs bench/relay/relay_bench.cpp and prints
# its markdown report (also written to <build>/bench-relay/latest.md). About 8 minutes.
#
#   IDEMPROXY_BUILD_DIR   build directory (default: build)
#   IDEM_BENCH_RATE       insert rate of the lag run, rows/s (default 2000)
#   IDEM_BENCH_SECONDS    length of the lag run (default 10)
#   IDEM_BENCH_ONLY       one part: throughput, latency, burst or backlog (default: all)
set -euo pipefail

IDEM_SCRIPT=bench/relay/run.sh
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO"
# shellcheck source=SCRIPTDIR/../../deploy/local-env.sh
source "$REPO/deploy/local-env.sh"
BUILD_DIR=${IDEMPROXY_BUILD_DIR:-build}

idem_install_dependencies
cmake -S "$REPO" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
if ! grep -q 'bench/relay' "$BUILD_DIR/build.ninja" 2>/dev/null; then
  idem_die "bench/relay is not part of the build: add add_subdirectory(relay) to bench/CMakeLists.txt"
fi
cmake --build "$BUILD_DIR" -j 2 --target idemrelay idemrelay-bench

WORK=$(mktemp -d "${TMPDIR:-/tmp}/idemrelay-bench.XXXXXX")
IDEM_REDIS_PID=
cleanup() {
  local status=$?
  idem_stop_pid "$IDEM_REDIS_PID"
  idem_stop_postgres "$WORK/pgdata"
  rm -rf "$WORK"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

idem_start_postgres "$WORK"
idem_start_redis "$WORK"
mkdir -p "$BUILD_DIR/bench-relay"
{
  echo "# idemrelay bench, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  "$BUILD_DIR/bench/relay/idemrelay-bench" --pg "$IDEMPROXY_PG_DSN" --pg-log "$IDEMPROXY_PG_LOG" \
    --redis-port "$IDEMPROXY_REDIS_PORT" --only "${IDEM_BENCH_ONLY:-}" \
    --relay "$BUILD_DIR/proxy/app/idemrelay" --work "$WORK/bench" \
    --rate "${IDEM_BENCH_RATE:-2000}" --seconds "${IDEM_BENCH_SECONDS:-10}"
  echo
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$BUILD_DIR/bench-relay/latest.md"
