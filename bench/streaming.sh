#!/usr/bin/env bash
# The streaming scenarios (bench/run.sh --streaming; a small form at the end of --quick), sourced by
# bench/run.sh after Postgres is up and the proxy's schema migrated: run_streaming starts
# idem-stream-upstream (tests/support: generated bodies out, uploads hashed, SSE), an idemproxy whose
# route is `key: "off"` (every body streamed), and an nginx configured for streaming, then runs each
# scenario against the upstream directly, idemproxy and nginx side by side, STREAM_ROUNDS times.
# Every body is verified by bench/stream_client.py. Around each run, for the proxy's processes:
#   CPU     utime + stime (bench/cpu_sample.sh: every thread, nginx's master with its workers),
#           per GiB moved: the figure to trust on this shared machine, unlike the wall clock
#   memory  VmHWM reset (`echo 5 > /proc/PID/clear_refs`) and VmRSS read before the run, VmHWM
#           after: the peak RSS growth of the run, summed over the processes (nginx: master and
#           workers), and the absolute peak beside it
# Results: $WORK/streaming.json ({setup, runs}); bench/streaming_report.py makes the table.
# From bench/run.sh: BUILD_DIR, STREAM_UPSTREAM_BIN, WORK, REPO, QUICK, PROXY_WORKERS, CONFIG_FLAVOUR,
# FAILED, start_proxy, nginx_temp_paths.

STREAM_CLIENT=$REPO/bench/stream_client.py
STREAM_UPSTREAM_PID=
STREAM_PROXY_PID=
STREAM_NGINX_PID=

stop_streaming() {
  idem_stop_pid "$STREAM_PROXY_PID"
  if [ -s "$WORK/nginx-stream/nginx.pid" ]; then
    idem_stop_pid "$(cat "$WORK/nginx-stream/nginx.pid")"
  fi
  idem_stop_pid "$STREAM_NGINX_PID"
  idem_stop_pid "$STREAM_UPSTREAM_PID"
  STREAM_PROXY_PID='' STREAM_NGINX_PID='' STREAM_UPSTREAM_PID=
}

streaming_profile() {
  if [ "$QUICK" = 1 ]; then
    # The smoke test's form: every scenario kind once, small, idemproxy and nginx only: seconds.
    STREAM_ROUNDS=1
    STREAM_BIG=$((64 << 20))
    STREAM_MANY=8
    STREAM_MANY_SIZE=$((8 << 20))
    STREAM_SSE_STREAMS=100
    STREAM_SSE_EVENTS=5
    STREAM_SSE_INTERVAL_MS=50
    STREAM_TARGETS=(idemproxy nginx)
    STREAM_DOWNLOAD_TARGETS=(idemproxy nginx)
  else
    STREAM_ROUNDS=${IDEM_BENCH_STREAM_ROUNDS:-3}
    STREAM_BIG=$((1 << 30))
    STREAM_MANY=64
    STREAM_MANY_SIZE=$((16 << 20))
    # An event every 500 ms per stream (2,000 events/s in all): a feed's pace, and a rate the one
    # Python client takes without queueing on this 2-core machine (every 100 ms, the client's
    # own queue put its direct p50 at 20-50 ms).
    STREAM_SSE_STREAMS=1000
    STREAM_SSE_EVENTS=20
    STREAM_SSE_INTERVAL_MS=500
    STREAM_TARGETS=(direct idemproxy nginx)
    STREAM_DOWNLOAD_TARGETS=(direct idemproxy nginx nginx-buffered nginx-32k)
  fi
}

start_stream_upstream() {
  : >"$WORK/stream-upstream.out"
  "$STREAM_UPSTREAM_BIN" --listen 127.0.0.1:0 >"$WORK/stream-upstream.out" 2>"$WORK/stream-upstream.err" &
  STREAM_UPSTREAM_PID=$!
  STREAM_UPSTREAM_PORT=
  for _ in $(seq 1 100); do
    STREAM_UPSTREAM_PORT=$(sed -n 's/^listening 127\.0\.0\.1:\([0-9][0-9]*\)$/\1/p' "$WORK/stream-upstream.out")
    [ -n "$STREAM_UPSTREAM_PORT" ] && break
    kill -0 "$STREAM_UPSTREAM_PID" 2>/dev/null || break
    sleep 0.1
  done
  [ -n "$STREAM_UPSTREAM_PORT" ] || { cat "$WORK/stream-upstream.err" >&2; idem_die "idem-stream-upstream did not start"; }
  idem_log "stream upstream on 127.0.0.1:$STREAM_UPSTREAM_PORT (pid $STREAM_UPSTREAM_PID)"
}

# nginx as users configure it to stream (the README's "Streaming scenarios" says why each line):
# /stream/ unbuffered both ways, /buffered/ the download alternative (buffers in memory, never a
# temporary file); /window32k/ is /stream/ tuned to read 32 KiB at a time, idemproxy's window (not a
# user's default: a reference for what the window size alone is worth).
start_stream_nginx() {
  local dir=$WORK/nginx-stream temp_paths
  mkdir -p "$dir/temp"
  temp_paths=$(nginx_temp_paths "$dir")
  STREAM_NGINX_PORT=$(idem_free_port)
  cat >"$dir/nginx.conf" <<EOF
# Written by bench/streaming.sh: nginx streaming bodies from and to idem-stream-upstream.
daemon off;
master_process on;
worker_processes $PROXY_WORKERS;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
worker_rlimit_nofile 16384;
events { worker_connections 8192; }
http {
  access_log off;
$temp_paths
  upstream stream_upstream {
    server 127.0.0.1:$STREAM_UPSTREAM_PORT;
    keepalive 128;
  }
  server {
    listen 127.0.0.1:$STREAM_NGINX_PORT;
    client_max_body_size 0;
    proxy_http_version 1.1;
    proxy_set_header Connection "";
    location /stream/ {
      proxy_pass http://stream_upstream;
      proxy_buffering off;
      proxy_request_buffering off;
    }
    location /buffered/ {
      proxy_pass http://stream_upstream;
      proxy_max_temp_file_size 0;
      proxy_request_buffering off;
    }
    location /window32k/ {
      proxy_pass http://stream_upstream;
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_buffer_size 32k;
      proxy_buffers 8 32k;  # unused unbuffered, but nginx checks its busy buffers (2 x 32k) against them
    }
  }
}
EOF
  nginx -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log" -t -q || idem_die "nginx rejected $dir/nginx.conf"
  nginx -p "$dir/" -c "$dir/nginx.conf" -e "$dir/error.log" >"$dir/stdout.log" 2>&1 &
  STREAM_NGINX_PID=$!
  idem_wait_for_port "$STREAM_NGINX_PORT" 10 || { cat "$dir/error.log" >&2; idem_die "nginx (streaming) did not start"; }
  idem_log "nginx (streaming) on 127.0.0.1:$STREAM_NGINX_PORT (pid $STREAM_NGINX_PID)"
}

start_stream_proxy() {
  STREAM_PROXY_PORT=$(idem_free_port)
  local extra=""
  [ "${CONFIG_FLAVOUR:-}" = plain ] || extra="admin: { listen: 127.0.0.1:$(idem_free_port) }
log: { access: false }"
  # Upstream connections: one per SSE stream (nginx opens as many); bodies up to 2 GiB; a streamed
  # answer's silence bound of 60 s, nginx's default proxy_read_timeout.
  cat >"$WORK/idemproxy-stream.yaml" <<EOF
# Written by bench/streaming.sh.
listen: 127.0.0.1:$STREAM_PROXY_PORT
workers: $PROXY_WORKERS
upstream: { url: "http://127.0.0.1:$STREAM_UPSTREAM_PORT", max_connections: 4096, timeout: 60s }
store:
  postgres: { dsn: "$IDEMPROXY_PG_DSN", pool_size: 4 }
limits: { max_request_body: 2GiB, idle_timeout: 120s }
defaults: { lease: 2m }  # unused (no route is guarded), but --check holds every lease to upstream.timeout
routes:
  - name: bench-stream
    match: { path: /stream/* }
    key: "off"
$extra
EOF
  start_proxy idemproxy-stream "$STREAM_PROXY_PORT" "$WORK/idemproxy-stream.yaml"
  STREAM_PROXY_PID=$STARTED_PID
}

# proxy_pids TARGET: the processes whose CPU and memory a run of TARGET is charged (none for direct).
proxy_pids() {
  case "$1" in
    idemproxy) echo "$STREAM_PROXY_PID" ;;
    nginx*) echo "$STREAM_NGINX_PID $(cat "/proc/$STREAM_NGINX_PID/task/$STREAM_NGINX_PID/children" 2>/dev/null)" ;;
  esac
}
# status_kib PID FIELD: a VmRSS/VmHWM line of /proc/PID/status, in KiB (0 when gone).
status_kib() { awk -v field="$2:" '$1 == field { print $2; found = 1 } END { if (!found) print 0 }' "/proc/$1/status" 2>/dev/null || echo 0; }
sum_kib() {
  local field=$1 pid total=0
  shift
  for pid in "$@"; do total=$((total + $(status_kib "$pid" "$field"))); done
  echo "$total"
}

# stream_run SCENARIO TARGET ROUND CLIENT_ARGS...: one verified client run, measured.
stream_run() {
  STREAM_RUN_COUNT=$((${STREAM_RUN_COUNT:-0} + 1))
  # Numbered: the results keep the order the runs were made in.
  local scenario=$1 target=$2 round=$3 port path pids group
  local out
  out=$WORK/stream-runs/$(printf %03d "$STREAM_RUN_COUNT")-$1-$2-$3
  shift 3
  case "$target" in
    direct) port=$STREAM_UPSTREAM_PORT path=/stream ;;
    idemproxy) port=$STREAM_PROXY_PORT path=/stream ;;
    nginx) port=$STREAM_NGINX_PORT path=/stream ;;
    nginx-buffered) port=$STREAM_NGINX_PORT path=/buffered ;;
    nginx-32k) port=$STREAM_NGINX_PORT path=/window32k ;;
  esac
  read -r -a pids <<<"$(proxy_pids "$target")"
  group=$(
    IFS=,
    echo "${pids[*]:-}"
  )
  local pid
  for pid in "${pids[@]}"; do
    echo 5 >"/proc/$pid/clear_refs" 2>/dev/null || idem_log "cannot reset VmHWM of $pid: the peak is since its start"
  done
  local rss_before
  rss_before=$(sum_kib VmRSS "${pids[@]}")
  bash "$REPO/bench/cpu_sample.sh" "$out.cpu-before" "proxy=$group" "upstream=$STREAM_UPSTREAM_PID"
  local status=0 mode=$1
  shift
  # (idem-stream-upstream serves /download, /upload and /sse under any prefix.)
  timeout 600 python3 "$STREAM_CLIENT" "$mode" --url "http://127.0.0.1:$port$path/$mode" "$@" >"$out.client" 2>"$out.client-err" || status=$?
  bash "$REPO/bench/cpu_sample.sh" "$out.cpu-after" "proxy=$group" "upstream=$STREAM_UPSTREAM_PID"
  local hwm
  hwm=$(sum_kib VmHWM "${pids[@]}")
  if [ "$status" != 0 ] || ! jq -e . "$out.client" >/dev/null 2>&1; then
    FAILED+=("$scenario/$target/$round")
    idem_log "$scenario $target round $round FAILED: $(head -c 600 "$out.client") $(tail -n 3 "$out.client-err")"
    [ -s "$out.client" ] && jq -e . "$out.client" >/dev/null 2>&1 || echo '{"errors": 1}' >"$out.client"
  fi
  local tck
  tck=$(getconf CLK_TCK)
  ticks_of() { awk -v name="$2" '$1 == name { print $2 }' "$1"; }
  jq -n --arg scenario "$scenario" --arg target "$target" --argjson round "$round" --slurpfile client "$out.client" \
    --argjson proxy_ticks "$(($(ticks_of "$out.cpu-after" proxy) - $(ticks_of "$out.cpu-before" proxy)))" \
    --argjson upstream_ticks "$(($(ticks_of "$out.cpu-after" upstream) - $(ticks_of "$out.cpu-before" upstream)))" \
    --argjson tck "$tck" --argjson processes "${#pids[@]}" --argjson rss_before "$rss_before" --argjson hwm "$hwm" \
    '$client[0] as $c | ((($c.bytes // 0) / 1073741824)) as $gib |
     {scenario: $scenario, target: $target, round: $round, client: $c,
      proxy_cpu_s: (if $processes > 0 then $proxy_ticks / $tck else null end),
      proxy_cpu_s_per_gib: (if $processes > 0 and $gib > 0 then ($proxy_ticks / $tck / $gib) else null end),
      upstream_cpu_s_per_gib: (if $gib > 0 then ($upstream_ticks / $tck / $gib) else null end),
      rss_before_kib: (if $processes > 0 then $rss_before else null end),
      rss_peak_kib: (if $processes > 0 then $hwm else null end),
      rss_growth_kib: (if $processes > 0 then ($hwm - $rss_before) else null end)}' >"$out.json"
  idem_log "$scenario $target round $round: $(jq -c '{MiB_s: .client.mib_per_s, cpu_s: .proxy_cpu_s, cpu_s_per_GiB: .proxy_cpu_s_per_gib,
    rss_growth_kib, errors: .client.errors, latency_us: .client.latency_us}' "$out.json")"
}

run_streaming() {
  [ -x "$STREAM_UPSTREAM_BIN" ] || idem_die "missing $STREAM_UPSTREAM_BIN (build the idem-stream-upstream target)"
  streaming_profile
  mkdir -p "$WORK/stream-runs"
  start_stream_upstream
  start_stream_nginx
  start_stream_proxy
  local round target
  local timeout_s=$(((STREAM_SSE_EVENTS * STREAM_SSE_INTERVAL_MS) / 1000 + 120))
  for round in $(seq 1 "$STREAM_ROUNDS"); do
    # Within a round each scenario runs against every target in turn: neighbours in time.
    for target in "${STREAM_DOWNLOAD_TARGETS[@]}"; do
      stream_run download-1x$((STREAM_BIG >> 20))m "$target" "$round" download --size "$STREAM_BIG" --timeout 300
    done
    for target in "${STREAM_TARGETS[@]}"; do
      stream_run upload-1x$((STREAM_BIG >> 20))m "$target" "$round" upload --size "$STREAM_BIG" --timeout 300
    done
    for target in "${STREAM_DOWNLOAD_TARGETS[@]}"; do
      stream_run download-${STREAM_MANY}x$((STREAM_MANY_SIZE >> 20))m "$target" "$round" download \
        --size "$STREAM_MANY_SIZE" --concurrency "$STREAM_MANY" --timeout 300
    done
    for target in "${STREAM_TARGETS[@]}"; do
      stream_run sse-$STREAM_SSE_STREAMS "$target" "$round" sse --streams "$STREAM_SSE_STREAMS" \
        --events "$STREAM_SSE_EVENTS" --interval-ms "$STREAM_SSE_INTERVAL_MS" --timeout "$timeout_s"
    done
  done
  local setup="idem-stream-upstream (1 io thread) -> idemproxy (route key: off, $PROXY_WORKERS workers) or nginx ($PROXY_WORKERS workers; /stream/: proxy_buffering off, proxy_request_buffering off; /buffered/: proxy_max_temp_file_size 0; /window32k/: /stream/ with proxy_buffer_size 32k; HTTP/1.1 upstream keepalive) -> bench/stream_client.py (1 asyncio process, one request per connection, every body verified); $STREAM_ROUNDS round(s); SSE: $STREAM_SSE_STREAMS streams x $STREAM_SSE_EVENTS events every ${STREAM_SSE_INTERVAL_MS} ms"
  jq -n --arg setup "$setup" --argjson rounds "$STREAM_ROUNDS" --slurpfile runs <(cat "$WORK"/stream-runs/*.json) \
    '{setup: $setup, rounds: $rounds, runs: $runs}' >"$WORK/streaming.json"
  stop_streaming
}
