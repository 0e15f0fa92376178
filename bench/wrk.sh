# shellcheck shell=bash
# The throughput scenarios driven by wrk as well (2 threads, 64 connections, WRK_DURATION s each,
# bench/wrk/idem.lua), so the figures can be compared with a tool users know. Sourced by run.sh (full
# profile, right after idem-loadgen's 64-connection runs); one JSON object per run in $WORK/wrk/.
# wrk does not look at bodies or headers: a run is verified by its error counts (non-2xx included)
# and by the upstream's execution count (replays: none; plain and first requests: one per response,
# plus at most one in flight per connection when wrk stops).

WRK_THREADS=2
WRK_CONNECTIONS=64
WRK_DURATION=${IDEM_BENCH_WRK_DURATION:-5}
mkdir -p "$WORK/wrk"

wrk_upstream_count() { curl -s --max-time 5 "http://127.0.0.1:$UPSTREAM_PORT/__count" | tr -dc 0-9; }

# wrk_run NAME PORT PATH MODE [KEY]: MODE plain, unique (KEY is the prefix) or fixed (KEY, completed first).
wrk_run() {
  local name=$1 port=$2 path=$3 mode=$4 key=${5:-} out=$WORK/wrk/$1 before after status
  if [ "$mode" = fixed ]; then
    # The one key every request replays: completed once beforehand, with wrk's exact request.
    status=$(curl -s -o /dev/null -w '%{http_code}' --max-time 10 -X POST -H 'Content-Type: application/json' \
      -H "Idempotency-Key: $key" --data '{"amount":100}' "http://127.0.0.1:$port$path" || true)
    [ "$status" = 200 ] || { FAILED+=("$name (completing $key: $status)"); return 0; }
  fi
  before=$(wrk_upstream_count)
  if ! timeout $((WRK_DURATION + 60)) wrk -t "$WRK_THREADS" -c "$WRK_CONNECTIONS" -d "${WRK_DURATION}s" --timeout 5s \
    -s "$REPO/bench/wrk/idem.lua" "http://127.0.0.1:$port$path" -- "$mode" "$key" >"$out.out" 2>&1; then
    cat "$out.out" >&2
    FAILED+=("$name")
  fi
  after=$(wrk_upstream_count)
  if ! sed -n 's/^WRK_JSON //p' "$out.out" | jq --arg scenario "$name" --arg keys "$mode" \
    --argjson threads "$WRK_THREADS" --argjson connections "$WRK_CONNECTIONS" --argjson duration "$WRK_DURATION" \
    --argjson executions "$((${after:-0} - ${before:-0}))" '
    . + {scenario: $scenario, tool: "wrk", keys: $keys, threads: $threads, connections: $connections, duration_s: $duration,
         throughput_rps: ((.requests / (.duration_us / 1e6)) * 10 | round / 10),
         errors_total: (.errors | add), executions: $executions,
         executions_ok: (if $keys == "fixed" then $executions == 0
                         else $executions >= .requests and $executions <= .requests + $connections end)}' \
    >"$out.json" || [ ! -s "$out.json" ]; then
    FAILED+=("$name (no result)")
    rm -f "$out.json"
    return 0
  fi
  if [ "$(jq '.errors_total == 0 and .executions_ok' "$out.json")" != true ]; then
    FAILED+=("$name: $(jq -c '{errors, requests, executions}' "$out.json")")
  fi
  idem_log "$name: $(jq -r '"\(.throughput_rps) req/s, p50 \(.latency_us.p50) us, p99 \(.latency_us.p99) us, errors \(.errors_total), executions \(.executions)"' "$out.json")"
}

run_wrk() {
  local id
  id=wrk-$(date +%s)-$RANDOM
  wrk_run wrk-direct "$UPSTREAM_PORT" /plain plain
  wrk_run wrk-nginx "$NGINX_PORT" /plain plain
  wrk_run wrk-passthrough "$PROXY_PORT" /plain plain
  wrk_run wrk-replay "$PROXY_PORT" /keyed fixed "$id-replay"
  wrk_run wrk-replaydb "$PROXY_NOCACHE_PORT" /keyed fixed "$id-replaydb"
  if [ -n "$PROXY_REDIS_PID" ]; then
    wrk_run wrk-replayredis "$PROXY_REDIS_PORT" /keyed fixed "$id-replayredis"
  fi
  wrk_run wrk-first "$PROXY_PORT" /keyed unique "$id-first"
}
