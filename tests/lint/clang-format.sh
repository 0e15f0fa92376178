#!/usr/bin/env bash
# Every C++ file of proxy/ laid out as .clang-format says (clang-format --dry-run --Werror): the
# files that differ are listed with their first differences. Exits non-zero when any differs.
# Fix with: clang-format -i <file>...
#   tests/lint/clang-format.sh
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$REPO"
FORMAT=${CLANG_FORMAT:-clang-format}
mapfile -t files < <(git ls-files 'proxy/*.cpp' 'proxy/*.hpp')
if "$FORMAT" --dry-run --Werror "${files[@]}" 2>"${TMPDIR:-/tmp}/clang-format.out"; then
  echo "clang-format: ${#files[@]} files of proxy/ as .clang-format lays them out"
  exit 0
fi
head -n 40 "${TMPDIR:-/tmp}/clang-format.out" >&2
echo "clang-format: files differ from .clang-format (fix: clang-format -i FILE...)" >&2
exit 1
