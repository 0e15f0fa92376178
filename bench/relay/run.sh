#!/usr/bin/env bash
# The idemrelay benchmark, one command: builds idemrelay and idemrelay-bench, starts a private
# Postgres 15, Redis and nats-server (JetStream, store in the work dir) on loopback (stopped on
# exit, by PID), runs bench/relay/relay_bench.cpp and prints
# its markdown report (also written to <build>/bench-relay/latest.md). About 10 minutes.
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
NATS_PID=
cleanup() {
  local status=$?
  idem_stop_pid "$NATS_PID"
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

# nats-server with JetStream for the NATS sink's rows: a free loopback port, up to 3 tries.
start_nats() {
  local attempt port
  mkdir -p "$WORK/nats/store"
  for attempt in 1 2 3; do
    port=$(idem_free_port)
    printf 'listen: 127.0.0.1:%s\njetstream { store_dir: "%s" }\n' "$port" "$WORK/nats/store" >"$WORK/nats/nats.conf"
    /usr/sbin/nats-server -c "$WORK/nats/nats.conf" >"$WORK/nats/nats.log" 2>&1 &
    NATS_PID=$!
    if idem_wait_for_port "$port" 10; then
      NATS_URL=nats://127.0.0.1:$port
      idem_log "nats-server listening on 127.0.0.1:$port (pid $NATS_PID)"
      return 0
    fi
    idem_stop_pid "$NATS_PID"
    NATS_PID=
    idem_log "nats-server did not start on port $port (attempt $attempt)"
  done
  tail -n 30 "$WORK/nats/nats.log" >&2 || true
  idem_die "could not start nats-server"
}
start_nats
mkdir -p "$BUILD_DIR/bench-relay"
{
  echo "# idemrelay bench, $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
  "$BUILD_DIR/bench/relay/idemrelay-bench" --pg "$IDEMPROXY_PG_DSN" --pg-log "$IDEMPROXY_PG_LOG" \
    --redis-port "$IDEMPROXY_REDIS_PORT" --nats-url "$NATS_URL" --only "${IDEM_BENCH_ONLY:-}" \
    --relay "$BUILD_DIR/proxy/app/idemrelay" --work "$WORK/bench" \
    --rate "${IDEM_BENCH_RATE:-2000}" --seconds "${IDEM_BENCH_SECONDS:-10}"
  echo
  echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$BUILD_DIR/bench-relay/latest.md"
