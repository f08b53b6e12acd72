#!/usr/bin/env bash
# Regenerates the golden outputs compared by tests/cli/golden_test.cc.
# Run after an intended change to the report, the JSON or the cost model,
# then review the diff (git diff tests/golden profiles/fixtures) before committing.
set -euo pipefail
cd "$(dirname "$0")/.."
planner=${PLANNER:-build/bin/planner}
while read -r golden args; do
  [ -z "$golden" ] && continue
  # shellcheck disable=SC2086
  "$planner" $args > "$golden" || [ $? -eq 3 ]
  echo "wrote $golden"
done < tests/golden/CASES
