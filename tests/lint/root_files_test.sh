#!/usr/bin/env bash
# Tests tests/lint/root_files.sh on a directory outside git: the root's own
# files (and generated files below the root) pass, and each planted
# generated-looking file at the root fails, named.
#   tests/lint/root_files_test.sh PATH/TO/root_files.sh
set -euo pipefail
lint=${1:?usage: root_files_test.sh PATH/TO/root_files.sh}
dir=$(mktemp -d); trap 'rm -rf "$dir"' EXIT
failures=0

for f in README.md LICENSE CMakeLists.txt pyproject.toml .gitignore .clang-format; do
  echo x > "$dir/$f"
done
mkdir -p "$dir/docs" "$dir/profiles"
echo '{}' > "$dir/profiles/cpu-s.profile.json"; echo x > "$dir/docs/table.csv"
if ! out=$("$lint" "$dir" 2>&1); then
  echo "FAIL: the clean tree was flagged:"; echo "$out"; failures=$((failures + 1))
fi

planted=(cpu-s.profile.json plan.json out.txt run.log report.html table.csv
         timeline.png a.out trace.json fidelity.jsonl planner.prof gpt2.profile
         results.tsv core perf.data)
for name in "${planted[@]}"; do
  echo x > "$dir/$name"
  if out=$("$lint" "$dir" 2>&1); then
    echo "FAIL: not flagged: $name"; failures=$((failures + 1))
  elif ! grep -qx "$name" <<<"$out"; then
    echo "FAIL: flagged without naming $name:"; echo "$out"; failures=$((failures + 1))
  fi
  rm -f "$dir/$name"
done

if [ $failures -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
echo "root_files.sh: the root's own files pass, ${#planted[@]} planted files fail"
