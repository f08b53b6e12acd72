#!/usr/bin/env bash
# Runs a GoogleTest executable as one CTest test (a shard of runtime_tests)
# and exits 77, the test's SKIP_RETURN_CODE, when it passed with any of its
# tests skipped (GTEST_SKIP), so that CTest reports a shard that did not run
# all of itself as Skipped, never as Passed. A failure stays a failure.
#   gtest_skips.sh EXECUTABLE [ARGS...]
set -uo pipefail
log=$(mktemp) || exit 1
trap 'rm -f "$log"' EXIT
"$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$rc" -eq 0 ] && grep -q '^\[  SKIPPED \]' "$log"; then
  skipped=$(grep -E '^\[  SKIPPED \] [^ ]+ \(' "$log" | sed -E 's/^\[  SKIPPED \] ([^ ]+) .*/\1/' | sort -u)
  echo "gtest_skips: $(echo "$skipped" | wc -l) skipped, reported as skipped (exit 77):" $skipped
  exit 77
fi
exit "$rc"
