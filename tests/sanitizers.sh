#!/usr/bin/env bash
# The hardening stages of the test run: the suites again under ASan+UBSan and under TSan, then each
# libFuzzer target for a bounded time. tests/run.sh sources this file and runs the stages after
# the plain suite, on the Postgres, PgBouncer and Redis servers it already started.
#
# Run on its own, it is tests/run.sh with only these stages (same servers set-up, same variables):
#   tests/sanitizers.sh                      # asan, tsan and fuzz
#   IDEMPROXY_STAGES=fuzz tests/sanitizers.sh
#
#   IDEMPROXY_ASAN_BUILD_DIR   default build-asan  (-DIDEM_SANITIZE=address, GCC)
#   IDEMPROXY_TSAN_BUILD_DIR   default build-tsan  (-DIDEM_SANITIZE=thread, GCC)
#   IDEMPROXY_FUZZ_BUILD_DIR   default build-fuzz  (-DIDEM_FUZZ=ON, clang)
#   IDEMPROXY_FUZZ_SECONDS     default 20: time each fuzz target runs
#
# A sanitizer report anywhere (a test binary, or an idemproxy/idemrelay process a test started)
# fails its stage: every sanitized process writes its reports under one log directory, which
# must stay empty. Suppressions (third-party false positives only) live in tests/sanitizers/.

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  export IDEMPROXY_STAGES=${IDEMPROXY_STAGES:-asan tsan fuzz}
  exec bash "$(dirname "${BASH_SOURCE[0]}")/run.sh" "$@"
fi

IDEM_SANITIZER_DIR=$IDEM_REPO/tests/sanitizers
IDEM_FUZZ_TARGETS=(idempotency_key canonical_json config_load route_match request_head)

# Both sanitizers run the suite except what measures or validates rather than tests code (the
# benchmark smoke: timing under a sanitizer means nothing; the offline manifest and monitoring-rule
# checks, which run promtool and node, not our code) and the
# scripts that run the same binaries again end to end (the chaos soak, the suite through PgBouncer,
# the demo): they add minutes of waiting and no code path the tests do not already take.
# ASan runs the failure suite (tests/failure: lost replies, crashes, outages), whose error paths
# are where a use-after-free would hide; TSan leaves it out: those tests spend their time waiting
# on leases and deadlines with one request per key, while the races TSan looks for (worker
# threads sharing the store pool, the replay cache, the metrics, the reloadable config) are in
# every other e2e test, the concurrency tests and the relay's.
# The HA formation tests (label ha: a minute of failovers, one at a time) run under TSan, where the
# connect path's host switching meets the admin thread's connections (it found a descriptor race
# there), and not under ASan, whose failure suite already takes the same error paths.
IDEM_SANITIZED_CTEST_ARGS=(-LE '^(bench|deploy|monitoring|soak|ha)$' -E '^(e2e_through_pgbouncer|demo_smoke)$')
IDEM_TSAN_CTEST_ARGS=(-LE '^(bench|deploy|monitoring|soak|e2e-failure)$' -E '^(e2e_through_pgbouncer|demo_smoke)$')

# The streaming tests move GiB bodies at full size in the plain stage; through instrumented code
# that takes minutes, so the sanitized stages divide their sizes (and skip their memory bounds,
# which a sanitizer's shadow memory and quarantine make meaningless): tests/support/streaming_client.hpp.
export IDEMPROXY_TEST_STREAM_SCALE_SANITIZED=${IDEMPROXY_TEST_STREAM_SCALE_SANITIZED:-64}

# ":suppressions=FILE" for a sanitizer's *_OPTIONS when tests/sanitizers/NAME.supp exists.
idem_suppressions() {
  if [ -f "$IDEM_SANITIZER_DIR/$1.supp" ]; then
    printf ':suppressions=%s' "$IDEM_SANITIZER_DIR/$1.supp"
  fi
}

# idem_stage_ctest NAME BUILD_DIR LOG_DIR [ctest args...]: runs ctest on a sanitized build, then
# fails when any process left a report in LOG_DIR (even one whose exit status a test ignored).
idem_stage_ctest() {
  local name=$1 build_dir=$2 log_dir=$3 status report
  shift 3
  set +e
  ctest --test-dir "$build_dir" --output-on-failure --no-tests=error -j "$IDEM_TEST_JOBS" --timeout 600 "$@"
  status=$?
  set -e
  for report in "$log_dir"/*; do
    [ -e "$report" ] || continue
    idem_log "$name: sanitizer report in $report:"
    head -n 80 "$report" >&2
    status=1
  done
  return "$status"
}

idem_stage_asan() {
  local build_dir=${IDEMPROXY_ASAN_BUILD_DIR:-build-asan} log_dir=$WORK/sanitizer-reports/asan
  if [ "${IDEMPROXY_SKIP_BUILD:-0}" != 1 ]; then
    idem_build "$build_dir" -DIDEM_SANITIZE=address || return 1
  fi
  mkdir -p "$log_dir"
  IDEMPROXY_TEST_STREAM_SCALE=$IDEMPROXY_TEST_STREAM_SCALE_SANITIZED \
  ASAN_OPTIONS="log_path=$log_dir/asan:detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1$(idem_suppressions asan)" \
  LSAN_OPTIONS="print_suppressions=0$(idem_suppressions lsan)" \
  UBSAN_OPTIONS="log_path=$log_dir/ubsan:print_stacktrace=1:halt_on_error=1$(idem_suppressions ubsan)" \
    idem_stage_ctest asan "$build_dir" "$log_dir" "${IDEM_SANITIZED_CTEST_ARGS[@]}"
}

idem_stage_tsan() {
  local build_dir=${IDEMPROXY_TSAN_BUILD_DIR:-build-tsan} log_dir=$WORK/sanitizer-reports/tsan
  if [ "${IDEMPROXY_SKIP_BUILD:-0}" != 1 ]; then
    idem_build "$build_dir" -DIDEM_SANITIZE=thread || return 1
  fi
  mkdir -p "$log_dir"
  IDEMPROXY_TEST_STREAM_SCALE=$IDEMPROXY_TEST_STREAM_SCALE_SANITIZED \
  TSAN_OPTIONS="log_path=$log_dir/tsan:second_deadlock_stack=1:history_size=4$(idem_suppressions tsan)" \
    idem_stage_ctest tsan "$build_dir" "$log_dir" "${IDEM_TSAN_CTEST_ARGS[@]}"
}

# idem_fuzz_one BUILD_DIR TARGET SECONDS LOG: one target from its seeds plus the corpus earlier runs
# of this build directory grew; a crash, leak, timeout or out-of-memory input fails it.
idem_fuzz_one() {
  local build_dir=$1 target=$2 seconds=$3 log=$4
  local corpus=$build_dir/corpus/$target artifacts=$build_dir/artifacts/$target
  local seeds=$IDEM_REPO/tests/fuzz/corpus/$target dict=$IDEM_REPO/tests/fuzz/$target.dict
  local args=(-max_total_time="$seconds" -timeout=10 -rss_limit_mb=0 -print_final_stats=1
              -artifact_prefix="$artifacts/")
  [ -f "$dict" ] && args+=(-dict="$dict")
  mkdir -p "$corpus" "$artifacts"
  # The memory bound is ASan's hard limit rather than libFuzzer's -rss_limit_mb: libFuzzer's own
  # out-of-memory path profiles the whole heap first, which can take many minutes.
  ASAN_OPTIONS=hard_rss_limit_mb=2048:detect_leaks=1 \
    timeout -k 10 $((seconds + 120)) "$build_dir/tests/fuzz/fuzz_$target" "${args[@]}" "$corpus" "$seeds" </dev/null >"$log" 2>&1
}

idem_stage_fuzz() {
  local build_dir=${IDEMPROXY_FUZZ_BUILD_DIR:-build-fuzz} seconds=${IDEMPROXY_FUZZ_SECONDS:-20}
  local log_dir=$WORK/fuzz-logs target status=0 runs pids=() i
  if [ "${IDEMPROXY_SKIP_BUILD:-0}" != 1 ]; then
    # Debian 12's clang and its libFuzzer runtime (shadows the global list for this call only).
    local IDEM_PACKAGES=(clang-14 libclang-rt-14-dev)
    idem_install_dependencies
    # CXX picks the compiler when the directory is first configured (a -DCMAKE_CXX_COMPILER that
    # differs in spelling from the cached one would make CMake drop the whole cache).
    CXX=clang++-14 idem_build "$build_dir" -DIDEM_FUZZ=ON --target idem-fuzz || return 1
  fi
  mkdir -p "$log_dir"
  # Two at a time: one per core.
  for ((i = 0; i < ${#IDEM_FUZZ_TARGETS[@]}; i += 2)); do
    pids=()
    for target in "${IDEM_FUZZ_TARGETS[@]:i:2}"; do
      idem_fuzz_one "$build_dir" "$target" "$seconds" "$log_dir/$target.log" &
      pids+=($!)
    done
    for target in "${IDEM_FUZZ_TARGETS[@]:i:2}"; do
      if wait "${pids[0]}"; then
        runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log_dir/$target.log")
        idem_log "fuzz $target: ${runs:-?} executions in ${seconds}s, corpus $(find "$build_dir/corpus/$target" -type f | wc -l) files (+ $(find "$IDEM_REPO/tests/fuzz/corpus/$target" -type f | wc -l) seeds)"
      else
        idem_log "fuzz $target FAILED (inputs kept in $build_dir/artifacts/$target):"
        grep -v '^#\|^	0x' "$log_dir/$target.log" | tail -n 60 >&2
        status=1
      fi
      pids=("${pids[@]:1}")
    done
  done
  return "$status"
}
