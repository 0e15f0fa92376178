#!/usr/bin/env bash
# The idemproxy bench, one command, from a fresh Debian 12: installs what is missing (nginx, gnuplot,
# jq), builds, starts a private Postgres cluster, Redis, the bench upstream, nginx and idemproxy on
# loopback, runs every scenario side by side in this one invocation (so the ratios between them
# hold on a noisy machine), verifies every response, and writes the results:
#
#   <results>/<UTC timestamp>.json   every run (idem-loadgen JSON), pgbench, Redis, the machine
#   <results>/latest.md              runs table with ratios vs nginx and direct, the targets
#   <results>/latency.svg            latency-by-percentile plot
#
#   bench/run.sh            full profile, about 7 minutes (the wrk runs included); results in
#                           bench/results
#   bench/run.sh --quick    every scenario kind once, short: about a minute; results in
#                           .work/bench-quick (the smoke test's profile: no timing is judged; no
#                           wrk runs, no counts)
#   bench/run.sh --cost     instructions per request instead of the clock (bench/cost.sh: callgrind
#                           on the one process serving each scenario), 60-90 s; results in
#                           bench/results, latest.md then shows the newest run of each kind
#   bench/run.sh --streaming  the streaming scenarios (bench/streaming.sh: a 1 GiB download and upload,
#                           64 concurrent 16 MiB downloads, 1,000 SSE streams; idemproxy beside nginx
#                           and the upstream alone), 3 rounds, about 5 minutes; results in bench/results,
#                           the table in streaming.md (--quick ends with a small form of them)
#   bench/run.sh --no-build use the build directory's binaries as they are
#   bench/run.sh --results DIR   write the results there instead
#
# Exits non-zero when any response failed verification, the storm executed other than once per
# round, or a step failed. Everything started is stopped on exit, by PID (nginx by its pid file).
#
#   IDEMPROXY_BUILD_DIR       build directory (default: build)
#   IDEM_BENCH_KEEP_TMP=1     keep the work directory (logs, configs, raw runs)
#   IDEM_BENCH_DURATION       seconds per measured closed/open-loop run (full 15, quick 1)
#   IDEM_BENCH_OPEN_RATE      open-loop rate in requests/s (default 4000)
#   IDEM_BENCH_WRK_DURATION   seconds per wrk run (default 5)
#   IDEM_BENCH_WORKERS        workers of idemproxy and nginx alike (default 2; 1 compares one against one)
#   IDEM_BENCH_COST_REQUESTS  requests counted per --cost window (default 2000, after 500 warm-up)
#   IDEM_BENCH_STREAM_ROUNDS  rounds of the --streaming scenarios (default 3)
set -euo pipefail

IDEM_SCRIPT=bench/run.sh
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
# shellcheck source=SCRIPTDIR/../deploy/local-env.sh
source "$REPO/deploy/local-env.sh"

QUICK=0
COST=0
STREAMING=0
BUILD=1
RESULTS_DIR=
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --cost) COST=1 ;;
    --streaming) STREAMING=1 ;;
    --no-build) BUILD=0 ;;
    --results) RESULTS_DIR=${2:?--results needs a directory}; shift ;;
    -h | --help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$REPO/bench/run.sh"; exit 0 ;;
    *) idem_die "unknown argument: $1 (try --help)" ;;
  esac
  shift
done

BUILD_DIR=${IDEMPROXY_BUILD_DIR:-build}
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR=$REPO/$BUILD_DIR ;; esac
PROXY_BIN=$BUILD_DIR/proxy/app/idemproxy
LOADGEN=$BUILD_DIR/bench/idem-loadgen
UPSTREAM_BIN=$BUILD_DIR/bench/idem-bench-upstream
REPORT_BIN=$BUILD_DIR/bench/idem-bench-report

# Profiles. Full: about 6 minutes. Quick: every kind of scenario once, about a minute (the suite
# runs it as a smoke test, alone on the machine: short runs keep that serial time small).
if [ "$QUICK" = 1 ]; then
  PROFILE=quick
  DURATION=${IDEM_BENCH_DURATION:-1}
  WARMUP=0.5
  SOAK=5
  IDLE_HOLD=2
  STORM_ROUNDS=2
  REDIS_GETS=5000
  RESULTS_DIR=${RESULTS_DIR:-$REPO/.work/bench-quick}
elif [ "$COST" = 1 ]; then
  PROFILE=cost
  DURATION=${IDEM_BENCH_DURATION:-15}
  WARMUP=0
  RESULTS_DIR=${RESULTS_DIR:-$REPO/bench/results}
elif [ "$STREAMING" = 1 ]; then
  PROFILE=streaming
  DURATION=0  # each scenario runs until its bodies are through
  RESULTS_DIR=${RESULTS_DIR:-$REPO/bench/results}
else
  PROFILE=full
  DURATION=${IDEM_BENCH_DURATION:-15}
  WARMUP=2
  SOAK=60
  IDLE_HOLD=5
  STORM_ROUNDS=5
  REDIS_GETS=50000
  RESULTS_DIR=${RESULTS_DIR:-$REPO/bench/results}
fi
OPEN_RATE=${IDEM_BENCH_OPEN_RATE:-4000}
OPEN_CONNECTIONS=16
# First requests carry their key in the body, so each body (and fingerprint) differs as real
# first requests' do; replays repeat their first request's body, as real retries do.
FIRST_BODY=(--body '{"amount":100,"order":"{key}"}')
REPLAY_KEYS=1000
STORM_CONNECTIONS=256
STORM_DELAY_MS=20  # the executed request takes this long upstream: the duplicates arrive in flight
IDLE_CONNECTIONS=1000
PGBENCH_CLIENTS=16
# Workers of idemproxy and of nginx alike: 1 against 1, or 2 against 2 (the other processes share
# the same cores either way).
PROXY_WORKERS=${IDEM_BENCH_WORKERS:-2}

# --- packages -------------------------------------------------------------------------------------
# The bench's own tools, on top of the project's list; each only when its command is missing (an
# installed full nginx or gnuplot-x11 does as well).
command -v nginx >/dev/null 2>&1 || IDEM_PACKAGES+=(nginx-light)
command -v gnuplot >/dev/null 2>&1 || IDEM_PACKAGES+=(gnuplot-nox)
command -v jq >/dev/null 2>&1 || IDEM_PACKAGES+=(jq)
command -v wrk >/dev/null 2>&1 || IDEM_PACKAGES+=(wrk)
command -v valgrind >/dev/null 2>&1 || IDEM_PACKAGES+=(valgrind)
command -v python3 >/dev/null 2>&1 || IDEM_PACKAGES+=(python3)

idem_install_dependencies  # only what is missing: nothing at all on a prepared machine
if [ "$BUILD" = 1 ]; then
  idem_build "$BUILD_DIR" --target idemproxy idem-bench
fi
STREAM_UPSTREAM_BIN=$BUILD_DIR/tests/support/idem-stream-upstream
for binary in "$PROXY_BIN" "$LOADGEN" "$UPSTREAM_BIN" "$REPORT_BIN" "$STREAM_UPSTREAM_BIN"; do
  [ -x "$binary" ] || idem_die "missing $binary (build it, or drop --no-build)"
done
for tool in nginx gnuplot jq wrk valgrind callgrind_control callgrind_annotate redis-benchmark python3 "$IDEM_PG_BIN/pgbench"; do
  command -v "$tool" >/dev/null 2>&1 || idem_die "missing $tool"
done

# --- processes ------------------------------------------------------------------------------------
# Postgres data lives under /tmp: the postgres user may not be able to enter the checkout.
WORK=$(mktemp -d "${TMPDIR:-/tmp}/idemproxy-bench.XXXXXX")
mkdir -p "$WORK/runs"
UPSTREAM_PID=
PROXY_PID=
PROXY_NOCACHE_PID=
PROXY_REDIS_PID=
NGINX_PID=
IDEM_REDIS_PID=
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  declare -F stop_streaming >/dev/null && stop_streaming
  idem_stop_pid "$PROXY_PID"
  idem_stop_pid "$PROXY_NOCACHE_PID"
  idem_stop_pid "$PROXY_REDIS_PID"
  if [ -s "$WORK/nginx/nginx.pid" ]; then
    idem_stop_pid "$(cat "$WORK/nginx/nginx.pid")"
  fi
  idem_stop_pid "$NGINX_PID"
  idem_stop_pid "$UPSTREAM_PID"
  idem_stop_pid "$IDEM_REDIS_PID"
  idem_stop_postgres "$WORK/pgdata"
  if [ "${IDEM_BENCH_KEEP_TMP:-0}" = 1 ]; then
    idem_log "kept $WORK"
  else
    rm -rf "$WORK"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# 1,000 idle connections plus everything else need more than the default 1,024 descriptors.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt 4096 ]; then
  idem_log "warning: only $(ulimit -n) file descriptors; the idle-connection run may fail"
fi

load_average() { cut -d' ' -f1-3 /proc/loadavg; }
LOAD_BEFORE=$(load_average)
STARTED=$SECONDS
idem_log "profile $PROFILE: ${DURATION}s per run; load average $LOAD_BEFORE on $(nproc) cores"

idem_start_postgres "$WORK"
# As the issue's reference figures: commits wait for their WAL write (the cluster keeps fsync off).
"$IDEM_PG_BIN/psql" -q -X -d "$IDEMPROXY_PG_DSN" -v ON_ERROR_STOP=1 \
  -c "ALTER SYSTEM SET synchronous_commit = on" -c "SELECT pg_reload_conf()" >/dev/null
idem_start_redis "$WORK"

# The bench upstream: one io thread, like nginx's one worker. Its output file exists before the
# loop reads it (the background child may not have opened it yet: sed on a missing file would end
# the script under set -e).
: >"$WORK/upstream.out"
"$UPSTREAM_BIN" --port 0 --threads 1 >"$WORK/upstream.out" 2>"$WORK/upstream.err" &
UPSTREAM_PID=$!
UPSTREAM_PORT=
for _ in $(seq 1 100); do
  UPSTREAM_PORT=$(sed -n 's/^listening 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$WORK/upstream.out")
  [ -n "$UPSTREAM_PORT" ] && break
  kill -0 "$UPSTREAM_PID" 2>/dev/null || break
  sleep 0.1
done
[ -n "$UPSTREAM_PORT" ] || { cat "$WORK/upstream.err" >&2; idem_die "idem-bench-upstream did not start"; }
idem_log "bench upstream on 127.0.0.1:$UPSTREAM_PORT (pid $UPSTREAM_PID)"

# nginx: one worker, upstream keep-alive, its own prefix, config, pid file and logs in the work
# directory. The system's nginx configuration and service are never touched.
# nginx_temp_paths DIR: the *_temp_path lines this nginx build takes, into DIR/temp.
nginx_temp_paths() {
  local module flag
  for module in client_body proxy fastcgi uwsgi scgi; do
    flag=${module/client_body/client-body}
    if nginx -V 2>&1 | grep -q -- "--http-$flag-temp-path"; then
      echo "  ${module}_temp_path $1/temp/$module;"
    fi
  done
}
start_nginx() {
  local dir=$WORK/nginx temp_paths
  mkdir -p "$dir/temp"
  temp_paths=$(nginx_temp_paths "$dir")
  NGINX_PORT=$(idem_free_port)
  cat >"$dir/nginx.conf" <<EOF
# Written by bench/run.sh: nginx as a plain reverse proxy in front of the bench upstream.
daemon off;
master_process on;
worker_processes $PROXY_WORKERS;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 8192; }
http {
  access_log off;
$temp_paths
  upstream bench_upstream {
    server 127.0.0.1:$UPSTREAM_PORT;
    keepalive 128;
    keepalive_requests 10000000;
    keepalive_timeout 120s;
  }
  server {
    listen 127.0.0.1:$NGINX_PORT;
    keepalive_requests 10000000;
    keepalive_timeout 120s;
    location / {
      proxy_pass http://bench_upstream;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
EOF
  nginx -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log" -t -q || idem_die "nginx rejected $dir/nginx.conf"
  nginx -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log" >"$dir/stdout.log" 2>&1 &
  NGINX_PID=$!
  idem_wait_for_port "$NGINX_PORT" 10 || { cat "$dir/error.log" >&2; idem_die "nginx did not start"; }
  idem_log "nginx $(nginx -v 2>&1 | sed 's/.*nginx\///') on 127.0.0.1:$NGINX_PORT (pid $NGINX_PID)"
}
[ "$COST" = 1 ] || [ "$STREAMING" = 1 ] || start_nginx

# write_proxy_config FILE PORT REPLAY_CACHE_BYTES ADMIN_PORT [plain|redis]: "plain" leaves out the
# admin and log sections (for an idemproxy that predates them); "redis" adds the Redis replay cache
# (store.redis, on the bench's Redis, with the default per-command deadline, or REDIS_TIMEOUT when set).
write_proxy_config() {
  local file=$1 port=$2 cache=$3 admin_port=$4 flavour=${5:-}
  local extra="" redis=""
  if [ "$flavour" != plain ]; then
    # Access logs off, as nginx's (access_log off): the bench measures proxying, not log writing.
    extra="admin: { listen: 127.0.0.1:$admin_port }
log: { access: false }"
  fi
  if [ "$flavour" = redis ]; then
    redis="
  redis: { address: \"127.0.0.1:$IDEMPROXY_REDIS_PORT\", key_prefix: \"bench:replay:\"${REDIS_TIMEOUT:+, timeout: $REDIS_TIMEOUT} }"
  fi
  cat >"$file" <<EOF
# Written by bench/run.sh.
listen: 127.0.0.1:$port
workers: $PROXY_WORKERS
upstream: { url: "http://127.0.0.1:$UPSTREAM_PORT", max_connections: 256, timeout: 10s }
store:
  postgres: { dsn: "$IDEMPROXY_PG_DSN", pool_size: 16 }$redis
replay_cache: { max_bytes: $cache }
limits: { idle_timeout: 120s }
defaults: { ttl: 1h, lease: 30s }
routes:
  - name: bench-keyed
    match: { method: POST, path: /keyed }
  - name: bench-plain
    match: { path: /plain }
    key: "off"
$extra
EOF
}
start_proxy() {  # NAME PORT CONFIG -> pid in STARTED_PID
  local name=$1 port=$2 config=$3
  "$PROXY_BIN" --config "$config" >"$WORK/$name.log" 2>&1 &
  STARTED_PID=$!
  if ! idem_wait_for_port "$port" 20; then
    tail -n 30 "$WORK/$name.log" >&2
    idem_die "$name did not start"
  fi
  idem_log "$name on 127.0.0.1:$port (pid $STARTED_PID)"
}

PROXY_PORT=$(idem_free_port)
PROXY_ADMIN_PORT=$(idem_free_port)
CONFIG_FLAVOUR=
write_proxy_config "$WORK/idemproxy.yaml" "$PROXY_PORT" 16MiB "$PROXY_ADMIN_PORT"
if ! "$PROXY_BIN" --config "$WORK/idemproxy.yaml" --check >"$WORK/check.log" 2>&1; then
  CONFIG_FLAVOUR=plain
  write_proxy_config "$WORK/idemproxy.yaml" "$PROXY_PORT" 16MiB "$PROXY_ADMIN_PORT" plain
  "$PROXY_BIN" --config "$WORK/idemproxy.yaml" --check >"$WORK/check-plain.log" 2>&1 ||
    { cat "$WORK/check.log" >&2; idem_die "idemproxy rejected its bench config"; }
  idem_log "this idemproxy takes no admin/log settings: running without them (no metrics)"
fi
"$PROXY_BIN" --config "$WORK/idemproxy.yaml" --migrate >"$WORK/migrate.log" 2>&1 ||
  { cat "$WORK/migrate.log" >&2; idem_die "idemproxy --migrate failed"; }
# scrape_metrics ADMIN_PORT: the proxy's /metrics text, empty when unavailable (best effort).
scrape_metrics() { curl -s --max-time 5 "http://127.0.0.1:$1/metrics" || true; }
# metric_sample TEXT SERIES: one sample's value from a scrape, 0 when absent.
metric_sample() { awk -v series="$2" '$1 == series { value = $2 } END { print value + 0 }' <<<"$1"; }
FAILED=()
if [ "$COST" = 1 ]; then
  # --- instructions per request (bench/cost.sh) ---------------------------------------------------
  # shellcheck source=SCRIPTDIR/cost.sh
  source "$REPO/bench/cost.sh"
  run_cost
elif [ "$STREAMING" = 1 ]; then
  # shellcheck source=SCRIPTDIR/streaming.sh
  source "$REPO/bench/streaming.sh"
  run_streaming
else
  start_proxy idemproxy "$PROXY_PORT" "$WORK/idemproxy.yaml"
  PROXY_PID=$STARTED_PID
  # The same proxy with its replay cache off: replays answered from Postgres.
  PROXY_NOCACHE_PORT=$(idem_free_port)
  write_proxy_config "$WORK/idemproxy-nocache.yaml" "$PROXY_NOCACHE_PORT" 0 "$(idem_free_port)" $CONFIG_FLAVOUR
  start_proxy idemproxy-nocache "$PROXY_NOCACHE_PORT" "$WORK/idemproxy-nocache.yaml"
  PROXY_NOCACHE_PID=$STARTED_PID
  # And with its replay cache off but the Redis replay cache on: replays answered from Redis.
  PROXY_REDIS_PORT=$(idem_free_port)
  PROXY_REDIS_ADMIN_PORT=$(idem_free_port)
  if [ "$CONFIG_FLAVOUR" != plain ]; then
    write_proxy_config "$WORK/idemproxy-redis.yaml" "$PROXY_REDIS_PORT" 0 "$PROXY_REDIS_ADMIN_PORT" redis
    if "$PROXY_BIN" --config "$WORK/idemproxy-redis.yaml" --check >"$WORK/check-redis.log" 2>&1; then
      start_proxy idemproxy-redis "$PROXY_REDIS_PORT" "$WORK/idemproxy-redis.yaml"
      PROXY_REDIS_PID=$STARTED_PID
    else
      idem_log "this idemproxy takes no store.redis: the Redis replay runs are skipped"
    fi
  fi

  # --- scenarios ------------------------------------------------------------------------------------
  RUN_COUNT=0
  # CPU time by process over each measured phase (bench/cpu_sample.sh), divided by its requests:
  # what each scenario costs every process on the request path, kernel work included.
  POSTMASTER_PID=$(head -n 1 "$WORK/pgdata/postmaster.pid")
  CPU_GROUPS=("idemproxy=$PROXY_PID,$PROXY_NOCACHE_PID,${PROXY_REDIS_PID:-}" "nginx=tree:$NGINX_PID"
    "upstream=$UPSTREAM_PID" "postgres=tree:$POSTMASTER_PID" "redis=${IDEM_REDIS_PID:-}")
  # For idem-loadgen's hooks, which run it through /bin/sh.
  cpu_sample_command() {
    printf 'bash %q %q' "$REPO/bench/cpu_sample.sh" "$1"
    printf ' %q' "${CPU_GROUPS[@]}"
  }
  take_cpu_sample() { bash "$REPO/bench/cpu_sample.sh" "$1" "${CPU_GROUPS[@]}"; }
  # cpu_per_request BEFORE AFTER REQUESTS: {"idemproxy": µs, ...} per request, from two samples.
  cpu_per_request() {
    awk -v requests="$3" -v hz="$(getconf CLK_TCK)" 'FNR == NR { before[$1] = $2; next }
      { out = out (out == "" ? "" : ", ") "\"" $1 "\": " sprintf("%.1f", ($2 - before[$1]) * 1e6 / hz / requests) }
      END { print "{" out "}" }' "$1" "$2"
  }
  # loadgen NAME ARGS...: one idem-loadgen run, its JSON kept in the work directory.
  loadgen() {
    local name=$1
    shift
    RUN_COUNT=$((RUN_COUNT + 1))
    local out requests
    out=$WORK/runs/$(printf '%02d' "$RUN_COUNT")-$name.json
    rm -f "$WORK/cpu-before" "$WORK/cpu-after"
    if ! "$LOADGEN" --scenario "$name" --json "$out" --count-from "127.0.0.1:$UPSTREAM_PORT" \
      --before-measure "$(cpu_sample_command "$WORK/cpu-before")" --after-measure "$(cpu_sample_command "$WORK/cpu-after")" \
      "$@" 2>>"$WORK/loadgen.log"; then
      FAILED+=("$name")
    fi
    if [ ! -s "$out" ]; then
      FAILED+=("$name (no result)")
      rm -f "$out"
    else
      requests=$(jq '.requests // 0' "$out")
      if [ "$requests" -gt 0 ] && [ -s "$WORK/cpu-before" ] && [ -s "$WORK/cpu-after" ]; then
        jq --argjson cpu "$(cpu_per_request "$WORK/cpu-before" "$WORK/cpu-after" "$requests")" \
          '. + {cpu_us_per_request: $cpu}' "$out" >"$out.tmp" && mv "$out.tmp" "$out"
      fi
    fi
    idem_log "$(tail -n 1 "$WORK/loadgen.log")"
  }
  DIRECT=(--target "127.0.0.1:$UPSTREAM_PORT" --path /plain)
  NGINX=(--target "127.0.0.1:$NGINX_PORT" --path /plain)
  PASSTHROUGH=(--target "127.0.0.1:$PROXY_PORT" --path /plain)
  KEYED=(--target "127.0.0.1:$PROXY_PORT" --path /keyed)
  KEYED_NOCACHE=(--target "127.0.0.1:$PROXY_NOCACHE_PORT" --path /keyed)
  KEYED_REDIS=(--target "127.0.0.1:$PROXY_REDIS_PORT" --path /keyed)
  CLOSED=(--duration "$DURATION" --warmup "$WARMUP")
  OPEN=(--duration "$DURATION" --rate "$OPEN_RATE" --connections "$OPEN_CONNECTIONS")

  # One connection: the latency of each path alone.
  loadgen direct-c1 "${DIRECT[@]}" "${CLOSED[@]}" --connections 1
  loadgen nginx-c1 "${NGINX[@]}" "${CLOSED[@]}" --connections 1
  loadgen passthrough-c1 "${PASSTHROUGH[@]}" "${CLOSED[@]}" --connections 1
  loadgen replay-c1 "${KEYED[@]}" "${CLOSED[@]}" --connections 1 --keys "replay:$REPLAY_KEYS"
  loadgen replaydb-c1 "${KEYED_NOCACHE[@]}" "${CLOSED[@]}" --connections 1 --keys "replay:$REPLAY_KEYS"
  if [ -n "$PROXY_REDIS_PID" ]; then
    REDIS_BEFORE=$(scrape_metrics "$PROXY_REDIS_ADMIN_PORT")
    loadgen replayredis-c1 "${KEYED_REDIS[@]}" "${CLOSED[@]}" --connections 1 --keys "replay:$REPLAY_KEYS"
    REDIS_AFTER=$(scrape_metrics "$PROXY_REDIS_ADMIN_PORT")
    # What the Redis replay cache did during that run (warm-up completions included), so the report
    # can say how many replays Redis really answered.
    redis_delta() { echo $(($(metric_sample "$REDIS_AFTER" "$1") - $(metric_sample "$REDIS_BEFORE" "$1"))); }
    jq -n --argjson hits "$(redis_delta idemproxy_redis_cache_hits_total)" \
      --argjson misses "$(redis_delta idemproxy_redis_cache_misses_total)" \
      --argjson writes "$(redis_delta idemproxy_redis_cache_writes_total)" \
      --argjson timeout "$(redis_delta 'idemproxy_redis_cache_fallbacks_total{reason="timeout"}')" \
      --argjson disconnected "$(redis_delta 'idemproxy_redis_cache_fallbacks_total{reason="disconnected"}')" \
      --argjson error "$(redis_delta 'idemproxy_redis_cache_fallbacks_total{reason="error"}')" \
      --argjson corrupt "$(redis_delta 'idemproxy_redis_cache_fallbacks_total{reason="corrupt"}')" \
      '{scenario: "replayredis-c1", hits: $hits, misses: $misses, writes: $writes,
        fallbacks: {timeout: $timeout, disconnected: $disconnected, error: $error, corrupt: $corrupt}}' \
      >"$WORK/redis-replay.json"
    idem_log "replayredis-c1: $(jq -c . "$WORK/redis-replay.json")"
  else
    echo '{}' >"$WORK/redis-replay.json"
  fi
  loadgen first-c1 "${KEYED[@]}" "${CLOSED[@]}" --connections 1 --keys unique "${FIRST_BODY[@]}"
  # 64 connections: throughput.
  loadgen direct-c64 "${DIRECT[@]}" "${CLOSED[@]}" --connections 64
  loadgen nginx-c64 "${NGINX[@]}" "${CLOSED[@]}" --connections 64
  loadgen passthrough-c64 "${PASSTHROUGH[@]}" "${CLOSED[@]}" --connections 64
  loadgen replay-c64 "${KEYED[@]}" "${CLOSED[@]}" --connections 64 --keys "replay:$REPLAY_KEYS"
  if [ "$QUICK" = 0 ]; then
    loadgen replaydb-c64 "${KEYED_NOCACHE[@]}" "${CLOSED[@]}" --connections 64 --keys "replay:$REPLAY_KEYS"
    if [ -n "$PROXY_REDIS_PID" ]; then
      loadgen replayredis-c64 "${KEYED_REDIS[@]}" "${CLOSED[@]}" --connections 64 --keys "replay:$REPLAY_KEYS"
    fi
    loadgen first-c64 "${KEYED[@]}" "${CLOSED[@]}" --connections 64 --keys unique "${FIRST_BODY[@]}"
    # The same scenarios driven by wrk, next to these (bench/wrk.sh).
    # shellcheck source=SCRIPTDIR/wrk.sh
    source "$REPO/bench/wrk.sh"
    run_wrk
  fi
  # First requests against the database's own limit, measured right after it.
  loadgen first-c16 "${KEYED[@]}" "${CLOSED[@]}" --connections 16 --keys unique "${FIRST_BODY[@]}"

  # pgbench: the proxy's claim and complete statements, taken from proxy/store/pg/sql.hpp as they are
  # now, with the parameters written in (same table, same shapes: a fresh key per transaction), as for
  # the bench's routes: ttl 1h, lease 30s, unknown_outcome lock (an unsettled claim also keeps the
  # default unknown_retention, 7d). The scope is the proxy's own, read from a row of the keyed route: its
  # length is in every row and every index entry, so a shorter one flatters the bound (13 bytes
  # instead of 79 wrote 26 % less WAL per pair and ran 8 % faster). The owner has the proxy's 32 characters.
  # pgbench takes any ":name" for a variable, even inside a string literal: no colon in the literals
  # (the scope, which has one, comes in as a -D variable).
  sql_constant() {
    sed -n "/inline constexpr const char\* $1 = R\"sql(/,/^)sql\";/p" "$REPO/proxy/store/pg/sql.hpp" | sed '1d;$d'
  }
  write_pgbench_script() {
    local claim complete key owner
    claim=$(sql_constant kClaim)
    complete=$(sql_constant kComplete)
    [ -n "$claim" ] && [ -n "$complete" ] || idem_die "cannot find kClaim/kComplete in proxy/store/pg/sql.hpp"
    key="('pgbench-' || :client_id::text || '-' || :seq::text)"
    owner="lpad(:client_id::text || '-' || :seq::text, 32, '0')"
    {
      echo '\set seq random(1, 9000000000000000000)'
      # $10 (the legacy fingerprint) first, before $1 would take its first two characters.
      printf '%s;\n' "$claim" | sed -e "s/\\\$10/NULL::text/g" -e "s/\\\$1/:scope/g" -e "s/\\\$2/$key/g" \
        -e "s/\\\$3/'v2_0000000000000000000000000000000000000000000000000000000000000000'/g" -e "s/\\\$4/$owner/g" \
        -e "s/\\\$5/3600000::bigint/g" -e "s/\\\$6/30000::bigint/g" -e "s/\\\$7/false/g" \
        -e "s/\\\$8/604800000::bigint/g" -e "s/\\\$9/:legacy_scope/g"
      printf '%s;\n' "$complete" | sed -e "s/\\\$1/:scope/g" -e "s/\\\$2/$key/g" -e "s/\\\$3/$owner/g" \
        -e "s/\\\$4/'completed'/g" -e "s/\\\$5/200/g" \
        -e "s/\\\$6/convert_to('Content-Type: application\\/json' || chr(13) || chr(10), 'UTF8')/g" \
        -e "s/\\\$7/convert_to('{\"ok\"' || chr(58) || 'true,\"id\"' || chr(58) || '12345}', 'UTF8')/g" \
        -e "s/\\\$8/3600000::bigint/g"
    } >"$WORK/claim_complete.pgbench"
  }
  write_pgbench_script
  PGBENCH_SCOPE=$("$IDEM_PG_BIN/psql" -X -At -d "$IDEMPROXY_PG_DSN" \
    -c "SELECT scope FROM idempotency_records WHERE scope LIKE 'bench-keyed/%' LIMIT 1")
  if [ -z "$PGBENCH_SCOPE" ]; then
    PGBENCH_SCOPE="bench-keyed/v2:$(printf '0%.0s' {1..64})"
    idem_log "no row of the proxy's to take a scope from: pgbench uses one of the same shape"
  fi
  # The scope a claim also probes (fingerprint::request_scope): the v1 form of a route without scope headers.
  PGBENCH_LEGACY_SCOPE="${PGBENCH_SCOPE%%/*}/-"
  children_of() { cat "/proc/$1/task/$1/children" 2>/dev/null || true; }
  # wait_for_reaped PID CHILDREN: until every child of PID not listed in CHILDREN is gone (3 s at most).
  wait_for_reaped() {
    local tries=0 child new
    while [ "$tries" -lt 60 ]; do
      new=0
      for child in $(children_of "$1"); do
        [[ " $2 " == *" $child "* ]] || new=1
      done
      [ "$new" = 0 ] && return 0
      sleep 0.05
      tries=$((tries + 1))
    done
  }
  # run_pgbench MODE: prepared (parsed and planned once per connection: the database's bound) or
  # extended (unnamed statements, parsed and planned on every execution).
  run_pgbench() {
    # (LC_ALL=C: `time` prints the locale's decimal separator.)
    local mode=$1 out=$WORK/pgbench-$1.out tps latency failed pairs cpu='{}' backends_before TIMEFORMAT='%3U %3S' LC_ALL=C
    idem_log "pgbench -M $mode: claim + complete, $PGBENCH_CLIENTS clients, ${DURATION}s"
    backends_before=$(children_of "$POSTMASTER_PID")
    take_cpu_sample "$WORK/cpu-before"
    if { time "$IDEM_PG_BIN/pgbench" -n -M "$mode" -c "$PGBENCH_CLIENTS" -j 2 -T "$DURATION" -f "$WORK/claim_complete.pgbench" \
      -D "scope=$PGBENCH_SCOPE" -D "legacy_scope=$PGBENCH_LEGACY_SCOPE" -h 127.0.0.1 -p "$IDEMPROXY_PG_PORT" -U postgres postgres >"$out" 2>&1; } 2>"$WORK/pgbench-time"; then
      # pgbench's backends count once the postmaster has reaped them (it then holds their times).
      wait_for_reaped "$POSTMASTER_PID" "$backends_before"
      take_cpu_sample "$WORK/cpu-after"
      tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$out" | tail -n 1)
      latency=$(sed -n 's/^latency average = \([0-9.]*\) ms.*/\1/p' "$out")
      failed=$(sed -n 's/^number of failed transactions: \([0-9]*\).*/\1/p' "$out")
      pairs=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$out")
      # pgbench's own CPU time (user + system, from `time`) beside what the samples saw.
      if [ "${pairs:-0}" -gt 0 ]; then
        cpu=$(cpu_per_request "$WORK/cpu-before" "$WORK/cpu-after" "$pairs" |
          jq --argjson pgbench "$(awk -v pairs="$pairs" '{ printf "%.1f", ($1 + $2) * 1e6 / pairs }' "$WORK/pgbench-time")" \
            'del(.loadgen) + {pgbench: $pgbench}')
      fi
      jq -n --argjson clients "$PGBENCH_CLIENTS" --argjson duration "$DURATION" --argjson tps "${tps:-0}" \
        --argjson latency "${latency:-0}" --argjson failed "${failed:-0}" --arg mode "$mode" --argjson cpu "$cpu" \
        '{clients: $clients, duration_s: $duration, tps: $tps, latency_avg_ms: $latency, failed: $failed, mode: $mode,
          cpu_us_per_pair: $cpu}' \
        >"$WORK/pgbench-$mode.json"
      idem_log "pgbench -M $mode: $tps claim+complete pairs/s"
    else
      cat "$out" >&2
      FAILED+=("pgbench -M $mode")
      echo '{}' >"$WORK/pgbench-$mode.json"
    fi
  }
  run_pgbench prepared
  run_pgbench extended

  # The storm: rounds of 256 concurrent duplicates of one key, exactly one upstream execution each.
  loadgen storm-c$STORM_CONNECTIONS "${KEYED[@]}" --keys same --connections "$STORM_CONNECTIONS" --rounds "$STORM_ROUNDS" \
    --header "Bench-Delay-Ms: $STORM_DELAY_MS"

  # Open loop at a fixed rate: latency under a steady load, without coordinated omission.
  loadgen nginx-open "${NGINX[@]}" "${OPEN[@]}"
  loadgen passthrough-open "${PASSTHROUGH[@]}" "${OPEN[@]}"
  loadgen replay-open "${KEYED[@]}" "${OPEN[@]}" --keys "replay:$REPLAY_KEYS"

  # One Redis round trip (redis-get), the reference for the Redis replay target: GETs of an existing
  # 128-byte value (about the size of a bench replay's record), one client, after the SETs that
  # create it.
  if redis-benchmark -h 127.0.0.1 -p "$IDEMPROXY_REDIS_PORT" -c 1 -n "$REDIS_GETS" -t set,get -d 128 --csv \
    >"$WORK/redis.csv" 2>&1; then
    # "test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",...
    REDIS_LINE=$(grep '^"GET"' "$WORK/redis.csv" | tr -d '"')
    REDIS_RPS=$(echo "$REDIS_LINE" | cut -d, -f2)
    REDIS_P50_MS=$(echo "$REDIS_LINE" | cut -d, -f5)
    jq -n --argjson rps "${REDIS_RPS:-0}" --argjson p50 "${REDIS_P50_MS:-0}" \
      '{tool: "redis-benchmark -c 1 -t get -d 128", rps: $rps, p50_us: ($p50 * 1000)}' >"$WORK/redis.json"
  else
    echo '{}' >"$WORK/redis.json"
  fi

  # Memory: idemproxy's RSS with its replay cache full (1,280 responses of 16 KiB: 20 MiB offered to
  # the 16 MiB default) and 1,000 idle keep-alive connections, then over a replay soak.
  proxy_metric() {  # NAME: one unlabelled sample from idemproxy's /metrics, empty when unavailable
    [ "$CONFIG_FLAVOUR" = plain ] && return 0
    # Best effort: a slow scrape must not end the run (set -e), the figure is then just missing.
    { curl -s --max-time 5 "http://127.0.0.1:$PROXY_ADMIN_PORT/metrics" || true; } |
      awk -v name="$1" '$1 == name { print $2; exit }' || true
  }
  loadgen memory-fill "${KEYED[@]}" --connections 16 --keys replay:1280 --body-bytes 16384 --duration 1
  CACHE_BYTES=$(proxy_metric idemproxy_replay_cache_bytes)
  jq -n --arg bytes "$CACHE_BYTES" '{replay_cache_bytes_before_idle: ($bytes | tonumber? // null),
    replay_cache_max_bytes: 16777216}' >"$WORK/proxy-metrics.json"
  loadgen memory-idle "${PASSTHROUGH[@]}" --idle-connections "$IDLE_CONNECTIONS" --hold "$IDLE_HOLD" --rss-pid "$PROXY_PID"
  loadgen memory-soak "${KEYED[@]}" --duration "$SOAK" --connections 16 --keys "replay:$REPLAY_KEYS" --rss-pid "$PROXY_PID"
  if [ "$QUICK" = 1 ]; then
    # The streaming scenarios' small form (bench/streaming.sh), so the smoke test covers them.
    # shellcheck source=SCRIPTDIR/streaming.sh
    source "$REPO/bench/streaming.sh"
    run_streaming
  fi
fi

# --- results --------------------------------------------------------------------------------------
LOAD_AFTER=$(load_average)
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$RESULTS_DIR"
COMMIT=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git -C "$REPO" status --porcelain -- proxy 2>/dev/null)" ]; then COMMIT+=" (proxy/ modified)"; fi
PG_VERSION=$("$IDEM_PG_BIN/postgres" --version | sed 's/.*) //')
if [ "$STREAMING" = 1 ]; then
  SETUP="loopback; $(jq -r .setup "$WORK/streaming.json")"
elif [ "$COST" = 1 ]; then
  SETUP="loopback; callgrind on the one process serving each scenario (idemproxy 1 worker, nginx as one process with master_process off, idem-bench-upstream 1 thread), the others at full speed; idem-loadgen, 1 connection, closed loop: $COST_WARMUP requests warm-up, then $COST_REQUESTS counted, $COST_REPEATS times per scenario; Postgres pool 16 (synchronous_commit on, fsync off), access log off"
else
  SETUP="loopback; idem-loadgen 1 thread; idem-bench-upstream 1 thread; nginx and idemproxy $PROXY_WORKERS worker(s) each, nginx with upstream keepalive and access log off; Postgres pool 16 (synchronous_commit on, fsync off), access log off; ${DURATION}s per run after ${WARMUP}s warm-up; replay over $REPLAY_KEYS keys; open loop $OPEN_RATE req/s on $OPEN_CONNECTIONS connections"
  [ "$QUICK" = 1 ] || SETUP+="; wrk $WRK_THREADS threads, $WRK_CONNECTIONS connections, ${WRK_DURATION}s per run"
fi
jq -n --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" --arg profile "$PROFILE" \
  --arg cpu "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)" --argjson cores "$(nproc)" \
  --arg kernel "$(uname -sr)" --arg load_before "$LOAD_BEFORE" --arg load_after "$LOAD_AFTER" --arg commit "$COMMIT" \
  --arg versions "nginx $(nginx -v 2>&1 | sed 's/.*nginx\///'), PostgreSQL $PG_VERSION, $(redis-server --version | cut -d' ' -f1-3)" \
  --arg setup "$SETUP" \
  --argjson elapsed "$((SECONDS - STARTED))" \
  '{date: $date, profile: $profile, cpu: $cpu, cores: $cores, kernel: $kernel, load_before: $load_before,
    load_after: $load_after, commit: $commit, versions: $versions, setup: $setup, elapsed_s: $elapsed}' >"$WORK/meta.json"
RESULTS_JSON=$RESULTS_DIR/$STAMP.json
# newest_results cost|clock: the newest results file of that kind in the results directory (a
# --streaming file is neither: streaming.md has its table).
newest_results() {
  local file
  while read -r file; do
    if [ "$(jq -r '.meta.profile | if . == "cost" or . == "streaming" then . else "clock" end' "$file" 2>/dev/null)" = "$1" ]; then
      echo "$file"
      return 0
    fi
  done < <(find "$RESULTS_DIR" -maxdepth 1 -name '20*.json' | sort -r)
}
if [ "$COST" = 1 ]; then
  jq -n --slurpfile meta "$WORK/meta.json" --slurpfile cost "$WORK/cost.json" '{meta: $meta[0], cost: $cost[0]}' \
    >"$RESULTS_JSON"
elif [ "$STREAMING" = 1 ]; then
  jq -n --slurpfile meta "$WORK/meta.json" --slurpfile streaming "$WORK/streaming.json" \
    '{meta: $meta[0], streaming: $streaming[0]}' >"$RESULTS_JSON"
else
  jq -n --slurpfile meta "$WORK/meta.json" --slurpfile pgbench "$WORK/pgbench-prepared.json" \
    --slurpfile pgbench_extended "$WORK/pgbench-extended.json" --slurpfile redis "$WORK/redis.json" \
    --slurpfile proxy_metrics "$WORK/proxy-metrics.json" --slurpfile redis_replay "$WORK/redis-replay.json" \
    --slurpfile runs <(cat "$WORK"/runs/*.json) --slurpfile wrk <(cat "$WORK"/wrk/*.json 2>/dev/null || true) \
    '{meta: $meta[0], runs: $runs, wrk: $wrk, pgbench: $pgbench[0], pgbench_extended: $pgbench_extended[0],
      redis_get: $redis[0], proxy_metrics: $proxy_metrics[0], redis_replay: $redis_replay[0]}' \
    >"$RESULTS_JSON"
  if [ -s "$WORK/streaming.json" ]; then  # --quick: the streaming scenarios' small form
    jq --slurpfile streaming "$WORK/streaming.json" '. + {streaming: $streaming[0]}' "$RESULTS_JSON" >"$RESULTS_JSON.tmp" &&
      mv "$RESULTS_JSON.tmp" "$RESULTS_JSON"
  fi
fi
if [ -s "$WORK/streaming.json" ]; then
  python3 "$REPO/bench/streaming_report.py" --markdown "$RESULTS_DIR/streaming.md" "$RESULTS_JSON" ||
    FAILED+=(streaming-report)
fi
if [ "$STREAMING" = 1 ]; then
  idem_log "results: $RESULTS_JSON, $RESULTS_DIR/streaming.md ($((SECONDS - STARTED))s)"
else
  # latest.md: the newest run of each kind (clock and cost) side by side; the plot from the clock run.
  CLOCK_JSON=$(newest_results clock)
  COST_JSON=$(newest_results cost)
  REPORT_ARGS=(--markdown "$RESULTS_DIR/latest.md")
  [ -z "$COST_JSON" ] || REPORT_ARGS+=(--cost "$COST_JSON")
  if [ -n "$CLOCK_JSON" ]; then
    REPORT_ARGS+=(--results "$CLOCK_JSON" --gnuplot "$WORK/latency.gp" --svg "$RESULTS_DIR/latency.svg")
  fi
  "$REPORT_BIN" "${REPORT_ARGS[@]}" || FAILED+=(report)
  if [ -n "$CLOCK_JSON" ] && [ "$COST" = 0 ]; then
    gnuplot "$WORK/latency.gp" 2>"$WORK/gnuplot.err" || { cat "$WORK/gnuplot.err" >&2; FAILED+=(plot); }
  fi
  idem_log "results: $RESULTS_JSON, $RESULTS_DIR/latest.md${CLOCK_JSON:+ (clock: $(basename "$CLOCK_JSON"))}${COST_JSON:+ (cost: $(basename "$COST_JSON"))} ($((SECONDS - STARTED))s)"
fi

if [ "${#FAILED[@]}" -ne 0 ]; then
  grep -hs '"errors"' "$WORK"/runs/*.json | jq -r 'select(.errors.total > 0) | "\(.scenario): \(.errors)"' >&2 || true
  idem_log "FAILED: ${FAILED[*]}"
  exit 1
fi
idem_log "every response verified"
