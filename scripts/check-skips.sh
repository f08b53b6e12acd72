#!/usr/bin/env bash
# Fails when CTest skipped a test that the allowed list does not name.
#   scripts/check-skips.sh CTEST_OUTPUT [ALLOWED]
# CTEST_OUTPUT: what `ctest` printed (its closing "The following tests did
# not run:" list); ALLOWED: one extended regex over test names a line, #
# comments (default .ci/allowed-skips). Prints the skipped tests and the
# list. Exit 0 when every test that did not run matches an entry, 1 when one
# does not (each named), 2 when CTEST_OUTPUT is not a ctest run's output.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
log=${1:?usage: check-skips.sh CTEST_OUTPUT [ALLOWED]}
allowed=${2:-$root/.ci/allowed-skips}
for f in "$log" "$allowed"; do
  [ -r "$f" ] || { echo "check-skips: cannot read $f" >&2; exit 2; }
done
if ! grep -qE '^[0-9]+% tests passed|^No tests were found' "$log"; then
  echo "check-skips: $log holds no ctest summary (\"N% tests passed, ...\")" >&2
  exit 2
fi

# "The following tests did not run:" then one "<tab>  12 - name (Skipped)"
# line per test (also "(Disabled)").
mapfile -t did_not_run < <(awk '
  /^The following tests did not run:/ { on = 1; next }
  on && /^\t/ { sub(/^[ \t]*[0-9]+ - /, ""); print; next }
  { on = 0 }' "$log")
mapfile -t patterns < <(grep -vE '^[[:space:]]*(#|$)' "$allowed")

echo "check-skips: allowed to skip ($allowed):"
for p in "${patterns[@]}"; do echo "check-skips:   $p"; done
echo "check-skips: ${#did_not_run[@]} test(s) did not run"
bad=0
for line in "${did_not_run[@]}"; do
  name=${line% (*)}
  why=${line##* (}
  why=${why%)}
  ok=""
  for p in "${patterns[@]}"; do
    if [[ $name =~ $p ]]; then ok=$p; break; fi
  done
  if [ -n "$ok" ]; then
    echo "check-skips:   $name ($why): allowed by $ok"
  else
    echo "check-skips:   $name ($why): NOT ALLOWED"
    bad=1
  fi
done
if [ "$bad" -ne 0 ]; then
  echo "check-skips: a test did not run that $allowed does not allow: install what it needs" \
       "(its output says what) or, where the CI machine cannot have it, add it there with why" >&2
  exit 1
fi
