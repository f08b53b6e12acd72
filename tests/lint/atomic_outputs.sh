#!/usr/bin/env bash
# Every output file goes through WriteOutputFile (remat/io/io.h, planner/src/io/io.cc
# and planner/src/io/): a regular file is replaced atomically (a temp file
# renamed into place, removed on failure or Ctrl-C), a link's target likewise,
# a FIFO or device written in place, every write checked. This check fails on
# any other way of creating or opening a file for writing in the sources
# (ofstream, fopen, open with O_CREAT or O_WRONLY ...), so a new output path
# cannot bypass it.
#   tests/lint/atomic_outputs.sh SOURCE_DIR
set -euo pipefail
root=${1:?usage: atomic_outputs.sh SOURCE_DIR}
dirs=()
for d in planner runtime visualize; do [ -d "$root/$d" ] && dirs+=("$root/$d"); done
writes='std::ofstream|\bofstream\b|\bfopen\(|\bfreopen\(|\bcreat\(|O_CREAT|O_WRONLY|O_RDWR|O_TRUNC'
hits=$(grep -rnE "$writes|std::filesystem::copy" \
         --include='*.cc' --include='*.h' --include='*.cpp' "${dirs[@]}" |
       grep -vE "^$root/planner/src/(io\.cc|io/[a-z_]+\.cc):" || true)
if [ -n "$hits" ]; then
  echo "files written without WriteOutputFile (remat/io/io.h):"
  echo "$hits"
  exit 1
fi
echo "all outputs go through WriteOutputFile"
