#!/usr/bin/env bash
# clang-tidy over every translation unit of proxy/, with the checks in .clang-tidy. Exits non-zero
# when any diagnostic points into proxy/.
#
#   tests/lint/clang-tidy.sh [BUILD_DIR]     (default: build; needs its compile_commands.json)
#
# A translation unit found clean is remembered by the hash of its preprocessed text, the compile
# command, the check list and the clang-tidy version, so a run after a small change only analyses
# what that change can affect (a full run is 6 to 25 minutes on 2 cores, depending on load). The
# checkout's own path is taken out of what is hashed, so every clone (CI's included) shares it.
#   IDEMPROXY_TIDY_CACHE   where clean results are remembered (default ~/.cache/idemproxy-clang-tidy)
#   IDEMPROXY_TIDY_JOBS    parallel clang-tidy processes (default 2)
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD_DIR=${1:-$REPO/build}
case "$BUILD_DIR" in /*) ;; *) BUILD_DIR=$PWD/$BUILD_DIR ;; esac
DB=$BUILD_DIR/compile_commands.json
CACHE=${IDEMPROXY_TIDY_CACHE:-${HOME:-/root}/.cache/idemproxy-clang-tidy}
JOBS=${IDEMPROXY_TIDY_JOBS:-2}
[ -f "$DB" ] || { echo "clang-tidy.sh: $DB not found (configure the build first)" >&2; exit 2; }
command -v clang-tidy >/dev/null || { echo "clang-tidy.sh: clang-tidy is not installed (apt-get install clang-tidy)" >&2; exit 2; }
mkdir -p "$CACHE"
OUT=$(mktemp -d "${TMPDIR:-/tmp}/clang-tidy.XXXXXX")
trap 'rm -rf "$OUT"' EXIT

# One line per product translation unit: "index<TAB>file".
jq -r --arg root "$REPO/proxy/" 'to_entries[] | select(.value.file | startswith($root)) | "\(.key)\t\(.value.file)"' "$DB" >"$OUT/units"
[ -s "$OUT/units" ] || { echo "clang-tidy.sh: no proxy/ sources in $DB" >&2; exit 2; }
# The checkout's path as a literal in extended regexes (it may hold . + and the like).
REPO_RE=$(printf '%s' "$REPO" | sed 's/[][\.*^$+?(){}|]/\\&/g')
SETTINGS_HASH=$( { clang-tidy --version; cat "$REPO/.clang-tidy"; } | sha256sum | cut -c1-64)

# $1: one line of $OUT/units.
check_unit() {
  set -o pipefail
  local index=${1%%$'\t'*} file=${1#*$'\t'} command preprocessed key log
  command=$(jq -r --argjson i "$index" '.[$i].command' "$DB")
  # The same compile command, preprocessing only: its output covers every header the unit sees.
  local preprocess
  preprocess=$(sed -E 's#^[^ ]*ccache ##; s# -(o|MT|MF) [^ ]+##g; s# -MD##; s# -c # #' <<<"$command")
  key=
  if preprocessed=$(cd "$BUILD_DIR" && eval "$preprocess -E -P -o -" 2>/dev/null | sed -E "s#${REPO_RE//#/\\#}#@REPO@#g" | sha256sum | cut -c1-64); then
    key=$(printf '%s %s %s %s' "$SETTINGS_HASH" "$preprocessed" "${command//"$REPO"/@REPO@}" "${file//"$REPO"/@REPO@}" |
          sha256sum | cut -c1-64)
    if [ -e "$CACHE/$key" ]; then return 0; fi
  fi
  log=$OUT/$(echo "$file" | tr / _).log
  local tidy_status=0
  clang-tidy -p "$BUILD_DIR" --quiet "$file" >"$log" 2>&1 || tidy_status=$?
  # Only diagnostics located in our sources count. The static analyzer also reports paths that end
  # inside Boost.Asio's coroutine machinery (awaitable.hpp), which clang 14's analyzer does not
  # model; those are not in proxy/ and are left out.
  if grep -qE "^$REPO_RE/proxy/[^:]+:[0-9]+:[0-9]+: (warning|error):" "$log"; then
    grep -E "^$REPO_RE/proxy/[^:]+:[0-9]+:[0-9]+: (warning|error):" -A3 "$log" >"$log.findings"
    return 1
  fi
  # Warnings alone exit 0; anything else (a compile error in a header, a bad flag) is a failure.
  if [ "$tidy_status" -ne 0 ]; then
    { echo "$file: clang-tidy exited with status $tidy_status"; tail -n 20 "$log"; } >"$log.findings"
    return 1
  fi
  # A unit whose preprocessing failed is analysed every time: nothing sound to remember it by.
  if [ -n "$key" ]; then touch "$CACHE/$key"; fi
}
export -f check_unit
export BUILD_DIR DB CACHE OUT REPO REPO_RE SETTINGS_HASH

total=$(wc -l <"$OUT/units")
status=0
# One whole line per process (paths may hold spaces); check_unit splits it at the tab.
xargs -P "$JOBS" -d '\n' -n1 bash -c 'check_unit "$0"' <"$OUT/units" || status=$?
findings=$(find "$OUT" -name '*.findings' | wc -l)
if [ "$findings" -gt 0 ]; then
  find "$OUT" -name '*.findings' -print0 | sort -z | xargs -0 cat
  echo "clang-tidy: findings in $findings of $total translation units" >&2
  exit 1
fi
[ "$status" -eq 0 ] || { echo "clang-tidy: a check failed to run (status $status)" >&2; exit 1; }
echo "clang-tidy: $total translation units of proxy/ clean"
