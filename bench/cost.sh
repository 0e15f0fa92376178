# shellcheck shell=bash
# bench/run.sh --cost: instructions per request, counted by callgrind in the one process that serves
# each scenario. Sourced by run.sh once Postgres, Redis and the bench upstream run; writes
# $WORK/cost.json (the "cost" object of the results file).
#
# Each measured process runs under `valgrind --tool=callgrind` (idemproxy with 1 worker; nginx as a
# single process, `master_process off`, which is then its one worker; the bench upstream with 1
# thread) and is driven by idem-loadgen on one keep-alive connection, closed loop: COST_WARMUP
# requests, `callgrind_control -z` (zero), COST_REQUESTS requests, `callgrind_control -d` (dump).
# The dump's instruction count (Ir, every thread of the process) divided by COST_REQUESTS is the
# figure; each scenario is measured COST_REPEATS times in the same process, so the report can show
# that the count repeats. The other processes (upstream, Postgres, Redis) run at full speed and are
# not counted, except the upstream itself for "direct".

COST_REQUESTS=${IDEM_BENCH_COST_REQUESTS:-2000}
COST_WARMUP=${IDEM_BENCH_COST_WARMUP:-500}
COST_REPEATS=2
COST_REPLAY_KEYS=100
COST_TOP=20  # hot spots listed for the first request
COST_DIR=$WORK/cost
COST_PID=
COST_DUMPS=0
mkdir -p "$COST_DIR/runs"

# cost_start NAME PORT COMMAND...: COMMAND under callgrind, waited for on PORT; its pid in COST_PID.
cost_start() {
  local name=$1 port=$2
  shift 2
  valgrind --tool=callgrind --callgrind-out-file="$COST_DIR/$name.%p.out" "$@" >"$COST_DIR/$name.log" 2>&1 &
  COST_PID=$!
  COST_DUMPS=0
  if ! idem_wait_for_port "$port" 120; then
    tail -n 30 "$COST_DIR/$name.log" >&2
    idem_die "$name did not start under callgrind"
  fi
  COST_NAME=$name
  idem_log "cost: $name under callgrind on 127.0.0.1:$port (pid $COST_PID)"
}
cost_stop() {
  idem_stop_pid "$COST_PID"
  COST_PID=
}

# cost_measure SCENARIO PROCESS PORT [idem-loadgen arguments...]: COST_REPEATS counted windows of
# COST_REQUESTS requests to the process under callgrind (COST_PID), one cost record each.
cost_measure() {
  local scenario=$1 process=$2 port=$3 rep tag dump ir
  shift 3
  for rep in $(seq 1 "$COST_REPEATS"); do
    tag=$scenario-r$rep
    if ! "$LOADGEN" --scenario "cost-$tag" --target "127.0.0.1:$port" --connections 1 --timeout 60 --duration 600 \
      --requests "$COST_REQUESTS" --warmup-requests "$COST_WARMUP" \
      --before-measure "callgrind_control -z $COST_PID >/dev/null" \
      --after-measure "callgrind_control -d $COST_PID >/dev/null" \
      --json "$COST_DIR/runs/$tag.json" "$@" 2>>"$WORK/loadgen.log"; then
      FAILED+=("cost $tag")
    fi
    COST_DUMPS=$((COST_DUMPS + 1))
    dump=$COST_DIR/$COST_NAME.$COST_PID.out.$COST_DUMPS
    ir=$(sed -n 's/^summary: \([0-9]*\)$/\1/p' "$dump" 2>/dev/null || true)
    if [ -z "$ir" ] || [ "$(jq '.requests' "$COST_DIR/runs/$tag.json" 2>/dev/null)" != "$COST_REQUESTS" ]; then
      FAILED+=("cost $tag (no count)")
      continue
    fi
    jq -n --arg scenario "$scenario" --arg process "$process" --argjson rep "$rep" --argjson ir "$ir" \
      --argjson requests "$COST_REQUESTS" --arg dump "$dump" \
      '{scenario: $scenario, process: $process, rep: $rep, ir: $ir, requests: $requests,
        ir_per_request: (($ir / $requests) | round), dump: $dump}' >"$COST_DIR/runs/$tag.cost.json"
    idem_log "cost: $tag: $((ir / COST_REQUESTS)) instructions per request ($process)"
  done
}

# cost_rows DUMP INCLUSIVE(yes|no) TOP [PATTERN]: "Ir<TAB>file:function<TAB>object" for callgrind_annotate's
# top entries (all of them with TOP 0) whose file:function matches PATTERN (an awk regex), leaving out
# the thread and event-loop frames (95 % of the total or more: in 3.19 they show even without --inclusive).
cost_rows() {
  local total
  total=$(sed -n 's/^summary: \([0-9]*\)$/\1/p' "$1")
  # Lines look like "  1,234,567 (12.34%)  /usr/include/boost/.../read.hpp:name(args) [/path/object]".
  callgrind_annotate --auto=no --inclusive="$2" --threshold=100 "$1" 2>/dev/null |
    awk -v total="$total" -v top="$3" -v pattern="${4:-.}" '
      /^ *[0-9,]+ \( *[0-9.]+%\)  / && !/PROGRAM TOTALS/ && (top + 0 == 0 || shown < top + 0) {
        ir = $1; gsub(",", "", ir); if (ir + 0 >= 0.95 * total) next
        line = $0; sub(/^ *[0-9,]+ \( *[0-9.]+%\)  /, "", line)
        object = "idemproxy"
        if (match(line, / \[\/[^]]*\]$/)) { object = substr(line, RSTART + 2, RLENGTH - 3); sub(/.*\//, "", object); line = substr(line, 1, RSTART - 1) }
        if (line !~ pattern) next
        print ir "\t" line "\t" object; shown++
      }'
}

# cost_short_name: "file:function" as "file.cpp: function" without directories, template arguments
# and parameter lists (.../read.hpp:boost::beast::http::detail::read_some_op<...>::operator()(...)).
cost_short_name() {
  awk '{
    sub(/^[^:]*\//, ""); sub(/:/, ": ")
    out = ""; depth = 0; n = length($0)
    for (i = 1; i <= n; i++) {
      c = substr($0, i, 1)
      if (c == "<" || c == "(") {
        if (depth == 0) out = out (c == "<" ? "<…>" : "()")
        depth++
      } else if ((c == ">" || c == ")") && depth > 0) {
        depth--
      } else if (depth == 0) {
        out = out c
      }
    }
    if (length(out) > 110) out = substr(out, 1, 110) "…"
    print out
  }'
}

# cost_rows_json ROWS_FILE TOTAL REQUESTS: [{function, object, ir_per_request, share}] from cost_rows.
cost_rows_json() {
  paste "$1" <(cut -f2 "$1" | cost_short_name) |
    jq -R -s --argjson total "$2" --argjson requests "$3" '
      split("\n") | map(select(length > 0) | split("\t") |
        {function: .[3], object: .[2], ir_per_request: ((.[0] | tonumber) / $requests | round),
         share: ((.[0] | tonumber) / $total * 1000 | round / 10)})'
}

# cost_hotspots DUMP REQUESTS: the first request's hot spots as JSON: the project's own functions
# (inclusive: with everything they call), the top functions by self cost (any library), and the
# self cost by object (idemproxy, libc, libstdc++, libpq, libcrypto...).
cost_hotspots() {
  local dump=$1 requests=$2 total
  total=$(sed -n 's/^summary: \([0-9]*\)$/\1/p' "$dump")
  cost_rows "$dump" yes "$COST_TOP" '(^|/)proxy/[a-z_]+/' >"$COST_DIR/hot-inclusive.tsv"
  cost_rows "$dump" no "$COST_TOP" >"$COST_DIR/hot-self.tsv"
  cost_rows "$dump" no 0 | awk -F'\t' '{ self[$3] += $1 } END { for (o in self) print self[o] "\t" o "\t" o }' |
    sort -rn >"$COST_DIR/objects.tsv"
  jq -n --argjson total "$total" --argjson requests "$requests" \
    --slurpfile inclusive <(cost_rows_json "$COST_DIR/hot-inclusive.tsv" "$total" "$requests") \
    --slurpfile self <(cost_rows_json "$COST_DIR/hot-self.tsv" "$total" "$requests") \
    --slurpfile objects <(cost_rows_json "$COST_DIR/objects.tsv" "$total" "$requests") '
    {ir_per_request: (($total / $requests) | round), functions: $inclusive[0], self: $self[0],
     by_object: ($objects[0] | map({object: .function, ir_per_request, share}))}'
}

cost_nginx_config() {  # DIR PROXY_PORT RETURN_PORT
  local dir=$1 temp_paths
  mkdir -p "$dir/temp"
  temp_paths=$(nginx_temp_paths "$dir")
  cat >"$dir/nginx.conf" <<EOF
# Written by bench/run.sh --cost: nginx as one process (no master: it is its own worker) under
# callgrind; proxy_pass as the bench's nginx, and return 200 with the upstream's body.
daemon off;
master_process off;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 1024; }
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
    listen 127.0.0.1:$2;
    keepalive_requests 10000000;
    keepalive_timeout 120s;
    location / {
      proxy_pass http://bench_upstream;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
  server {
    listen 127.0.0.1:$3;
    keepalive_requests 10000000;
    keepalive_timeout 120s;
    location / {
      default_type application/json;
      return 200 '{"ok":true,"id":12345}';
    }
  }
}
EOF
}

run_cost() {
  local port port2 admin plain=(--path /plain) keyed=(--path /keyed) count=(--count-from "127.0.0.1:$UPSTREAM_PORT")
  local started=$SECONDS

  # direct: the bench upstream alone, one io thread.
  port=$(idem_free_port)
  cost_start upstream "$port" "$UPSTREAM_BIN" --port "$port" --threads 1
  cost_measure direct "idem-bench-upstream, 1 thread" "$port" "${plain[@]}" --count-from "127.0.0.1:$port"
  cost_stop

  # nginx: proxy_pass (upstream keep-alive) and return 200, one process.
  port=$(idem_free_port)
  port2=$(idem_free_port)
  cost_nginx_config "$COST_DIR/nginx" "$port" "$port2"
  cost_start nginx "$port" nginx -p "$COST_DIR/nginx/" -c "$COST_DIR/nginx/nginx.conf" -e "$COST_DIR/nginx/error.log"
  idem_wait_for_port "$port2" 30 || idem_die "nginx (callgrind) did not listen on $port2"
  cost_measure nginx "nginx worker (proxy_pass, upstream keep-alive)" "$port" "${plain[@]}" "${count[@]}"
  cost_measure nginx-return "nginx worker (return 200)" "$port2" "${plain[@]}"
  cost_stop

  # idemproxy, 1 worker, replay cache on: passthrough, replay (cache hit), first request.
  port=$(idem_free_port)
  admin=$(idem_free_port)
  PROXY_WORKERS=1 write_proxy_config "$COST_DIR/idemproxy.yaml" "$port" 16MiB "$admin" $CONFIG_FLAVOUR
  cost_start idemproxy "$port" "$PROXY_BIN" --config "$COST_DIR/idemproxy.yaml"
  cost_measure passthrough "idemproxy, 1 worker (route key: off)" "$port" "${plain[@]}" "${count[@]}"
  cost_measure replay "idemproxy, 1 worker (replay cache hit)" "$port" "${keyed[@]}" "${count[@]}" \
    --keys "replay:$COST_REPLAY_KEYS"
  cost_measure first "idemproxy, 1 worker (claim, forward, complete)" "$port" "${keyed[@]}" "${count[@]}" --keys unique \
    "${FIRST_BODY[@]}"
  cost_stop

  # idemproxy, 1 worker, replay cache off, Redis replay cache on: replays answered from Redis.
  if [ "$CONFIG_FLAVOUR" != plain ]; then
    port=$(idem_free_port)
    admin=$(idem_free_port)
    # Under callgrind a Redis reply can miss the default 5 ms deadline (and fall back to Postgres): 1 s.
    REDIS_TIMEOUT=1s PROXY_WORKERS=1 write_proxy_config "$COST_DIR/idemproxy-redis.yaml" "$port" 0 "$admin" redis
    cost_start idemproxy-redis "$port" "$PROXY_BIN" --config "$COST_DIR/idemproxy-redis.yaml"
    local before after
    before=$(scrape_metrics "$admin")
    cost_measure replayredis "idemproxy, 1 worker (in-process cache off, Redis hit)" "$port" "${keyed[@]}" \
      "${count[@]}" --keys "replay:$COST_REPLAY_KEYS"
    after=$(scrape_metrics "$admin")
    COST_REDIS_HITS=$(($(metric_sample "$after" idemproxy_redis_cache_hits_total) -
      $(metric_sample "$before" idemproxy_redis_cache_hits_total)))
    cost_stop
  fi

  local first_dump
  first_dump=$(jq -r 'select(.scenario == "first") | .dump' "$COST_DIR"/runs/first-r1.cost.json 2>/dev/null || true)
  if [ -n "$first_dump" ] && [ -s "$first_dump" ]; then
    cost_hotspots "$first_dump" "$COST_REQUESTS" >"$COST_DIR/hotspots.json"
  else
    echo '{}' >"$COST_DIR/hotspots.json"
  fi
  jq -n --slurpfile hot "$COST_DIR/hotspots.json" --arg tool "$(valgrind --version) --tool=callgrind" \
    --argjson requests "$COST_REQUESTS" --argjson warmup "$COST_WARMUP" --argjson repeats "$COST_REPEATS" \
    --argjson replay_keys "$COST_REPLAY_KEYS" --argjson redis_hits "${COST_REDIS_HITS:-null}" \
    --argjson redis_replays "$((COST_REPEATS * (COST_WARMUP + COST_REQUESTS)))" \
    --argjson elapsed "$((SECONDS - started))" --slurpfile runs <(cat "$COST_DIR"/runs/*.cost.json) '
    {tool: $tool, requests: $requests, warmup: $warmup, repeats: $repeats, connections: 1,
     replay_keys: $replay_keys, redis_hits: $redis_hits, redis_replays: $redis_replays, elapsed_s: $elapsed,
     scenarios: ($runs | group_by(.scenario) | map({scenario: .[0].scenario, process: .[0].process,
       runs: map(.ir_per_request), ir_per_request: ((map(.ir_per_request) | add / length) | round),
       spread_pct: (((map(.ir_per_request) | max) - (map(.ir_per_request) | min)) * 10000
                    / (map(.ir_per_request) | min) | round / 100)})),
     first_hotspots: $hot[0]}' >"$WORK/cost.json"
  idem_log "cost: done in $((SECONDS - started))s"
}
