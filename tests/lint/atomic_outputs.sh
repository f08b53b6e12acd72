#!/usr/bin/env bash
# Every output file goes through WriteFileAtomic (planner/src/io.cc): a temp
# file renamed into place, removed on failure or Ctrl-C. This check fails on
# any other way of creating a file in the sources (ofstream, fopen, open with
# O_CREAT ...), so a new output path cannot bypass it.
#   tests/lint/atomic_outputs.sh SOURCE_DIR
set -euo pipefail
root=${1:?usage: atomic_outputs.sh SOURCE_DIR}
dirs=()
for d in planner runtime visualize; do [ -d "$root/$d" ] && dirs+=("$root/$d"); done
hits=$(grep -rnE 'std::ofstream|\bofstream\b|\bfopen\(|\bfreopen\(|\bcreat\(|O_CREAT|std::filesystem::copy' \
         --include='*.cc' --include='*.h' --include='*.cpp' "${dirs[@]}" |
       grep -v "^$root/planner/src/io.cc:" || true)
if [ -n "$hits" ]; then
  echo "files written without WriteFileAtomic (remat/io.h):"
  echo "$hits"
  exit 1
fi
echo "all outputs go through WriteFileAtomic"
