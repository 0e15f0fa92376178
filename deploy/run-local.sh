#!/usr/bin/env bash
# End-to-end demo on loopback, from a fresh Debian 12: installs missing packages, builds, starts a
# private Postgres 15 cluster, the demo upstream (idem-test-upstream) and idemproxy in front of it,
# then shows a first request, its replay, a fingerprint mismatch and a missing key with curl.
# Ctrl-C stops everything it started.
#
#   deploy/run-local.sh               run the demo and keep the proxy up
#   deploy/run-local.sh --smoke       run the demo requests, check their results, stop, exit 0/1
#   deploy/run-local.sh --no-build    skip apt and the build; use $IDEMPROXY_BIN and
#                                     $IDEM_TEST_UPSTREAM_BIN (or the build directory's binaries)
set -euo pipefail

IDEM_SCRIPT=run-local
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
# shellcheck source=SCRIPTDIR/local-env.sh
source "$REPO/deploy/local-env.sh"

SMOKE=0
BUILD=1
for arg in "$@"; do
  case "$arg" in
    --smoke) SMOKE=1 ;;
    --no-build) BUILD=0 ;;
    -h | --help) sed -n '2,12p' "$0"; exit 0 ;;
    *) idem_die "unknown argument: $arg (try --help)" ;;
  esac
done

BUILD_DIR=${IDEMPROXY_BUILD_DIR:-build}
PROXY_BIN=${IDEMPROXY_BIN:-$BUILD_DIR/proxy/app/idemproxy}
UPSTREAM_BIN=${IDEM_TEST_UPSTREAM_BIN:-$BUILD_DIR/tests/support/idem-test-upstream}
CONFIG=$REPO/deploy/demo.yaml

if [ "$BUILD" = 1 ]; then
  idem_install_dependencies
  idem_build "$BUILD_DIR" --target idemproxy idem-test-upstream
fi
[ -x "$PROXY_BIN" ] || idem_die "no idemproxy binary at $PROXY_BIN"
[ -x "$UPSTREAM_BIN" ] || idem_die "no idem-test-upstream binary at $UPSTREAM_BIN"

# Postgres data lives under /tmp: the postgres user may not be able to enter the checkout.
PG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/idemproxy-demo.XXXXXX")
# Logs: kept in .work/demo for an interactive demo, thrown away with the rest after a smoke run.
if [ "$SMOKE" = 1 ]; then
  DEMO_DIR=$PG_DIR/logs
else
  DEMO_DIR=$REPO/.work/demo
fi
mkdir -p "$DEMO_DIR"
UPSTREAM_PID=
PROXY_PID=
IDEM_REDIS_PID=
cleanup() {
  local status=$?
  trap - EXIT INT TERM
  idem_log "stopping the demo"
  idem_stop_pid "$PROXY_PID"
  idem_stop_pid "$UPSTREAM_PID"
  idem_stop_postgres "$PG_DIR/pgdata"
  rm -rf "$PG_DIR"
  exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

idem_start_postgres "$PG_DIR"

"$UPSTREAM_BIN" --listen 127.0.0.1:0 >"$DEMO_DIR/upstream.log" 2>&1 &
UPSTREAM_PID=$!
for _ in $(seq 1 100); do
  grep -q '^listening ' "$DEMO_DIR/upstream.log" && break
  sleep 0.1
done
UPSTREAM_PORT=$(sed -n 's/^listening 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$DEMO_DIR/upstream.log")
[ -n "$UPSTREAM_PORT" ] || { cat "$DEMO_DIR/upstream.log" >&2; idem_die "demo upstream did not start"; }

PROXY_PORT=8080
if [ "$SMOKE" = 1 ]; then
  PROXY_PORT=$(idem_free_port)
elif idem_port_in_use "$PROXY_PORT"; then
  PROXY_PORT=$(idem_free_port)
  idem_log "port 8080 is busy, using $PROXY_PORT"
fi
export IDEMPROXY_DEMO_PORT=$PROXY_PORT
export IDEMPROXY_DEMO_UPSTREAM_PORT=$UPSTREAM_PORT

"$PROXY_BIN" --config "$CONFIG" --migrate >"$DEMO_DIR/migrate.log" 2>&1 ||
  { cat "$DEMO_DIR/migrate.log" >&2; idem_die "idemproxy --migrate failed"; }
"$PROXY_BIN" --config "$CONFIG" >"$DEMO_DIR/proxy.log" 2>&1 &
PROXY_PID=$!
if ! idem_wait_for_port "$PROXY_PORT" 20; then
  tail -n 40 "$DEMO_DIR/proxy.log" >&2
  idem_die "idemproxy did not start listening on 127.0.0.1:$PROXY_PORT"
fi

URL=http://127.0.0.1:$PROXY_PORT
KEY=demo-$(date +%s)-$RANDOM
BODY='{"item": "book", "quantity": 1}'
OTHER_BODY='{"item": "book", "quantity": 2}'
failures=0

# Arguments as a copy-pasteable shell line: single quotes only where needed.
shell_quote() {
  local arg out=()
  for arg in "$@"; do
    if [[ "$arg" =~ ^[A-Za-z0-9_./:=@%+-]+$ ]]; then
      out+=("$arg")
    else
      out+=("'${arg//\'/\'\\\'\'}'")
    fi
  done
  printf '%s' "${out[*]}"
}

# show TITLE EXPECTED_STATUS EXPECT_REPLAY(yes|no) CURL_ARGS...: prints the command, runs it, checks it.
show() {
  local title=$1 expected=$2 replay=$3
  shift 3
  local output status
  printf '\n### %s\n$ curl -si' "$title"
  printf ' %s' "$(shell_quote "$@")"
  printf '\n'
  output=$(curl -si --max-time 10 "$@") || { echo "(curl failed)"; failures=$((failures + 1)); return 0; }
  printf '%s\n' "$output"
  status=$(printf '%s' "$output" | head -n 1 | awk '{print $2}')
  if [ "$status" != "$expected" ]; then
    idem_log "expected status $expected, got $status"
    failures=$((failures + 1))
  fi
  if [ "$replay" = yes ] && ! printf '%s' "$output" | grep -qi '^Idempotent-Replay: true'; then
    idem_log "expected an Idempotent-Replay: true header"
    failures=$((failures + 1))
  fi
}

show "1. first request: executed by the upstream, response stored" 200 no \
  -X POST "$URL/orders" -H "Idempotency-Key: $KEY" -H 'Content-Type: application/json' -d "$BODY"
show "2. retry with the same key and body: replayed, the upstream is not called" 200 yes \
  -X POST "$URL/orders" -H "Idempotency-Key: $KEY" -H 'Content-Type: application/json' -d "$BODY"
show "3. same key, different body: 422 fingerprint mismatch" 422 no \
  -X POST "$URL/orders" -H "Idempotency-Key: $KEY" -H 'Content-Type: application/json' -d "$OTHER_BODY"
show "4. no Idempotency-Key: 400" 400 no \
  -X POST "$URL/orders" -H 'Content-Type: application/json' -d "$BODY"
executions=$(curl -s --max-time 5 "http://127.0.0.1:$UPSTREAM_PORT/__count")
printf '\nupstream executions: %s (the replay and the rejected requests never reached it)\n' "$executions"
if [ "$executions" != '{"total":1}' ]; then
  idem_log "expected exactly one upstream execution"
  failures=$((failures + 1))
fi

if [ "$SMOKE" = 1 ]; then
  if [ "$failures" -ne 0 ]; then
    idem_log "smoke test FAILED ($failures problems)"
    exit 1
  fi
  idem_log "smoke test passed"
  exit 0
fi

cat <<EOF_INFO

idemproxy is listening on $URL (upstream 127.0.0.1:$UPSTREAM_PORT, logs in $DEMO_DIR).
Try it yourself, e.g.:
  curl -si -X POST $URL/orders -H 'Idempotency-Key: my-key-1' -H 'Content-Type: application/json' -d '{"item":"pen"}'
  curl -si -X POST $URL/webhooks/stripe -H 'webhook-id: evt_1' -d '{}'
Press Ctrl-C to stop.
EOF_INFO
wait "$PROXY_PID" || true
idem_log "idemproxy exited; see $DEMO_DIR/proxy.log"
