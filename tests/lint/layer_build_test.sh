#!/usr/bin/env bash
# The build refuses an upward include: a copy of planner/ is configured on
# its own and its lowest layer (io) built twice, as it is (it must build) and
# with a source that includes a higher layer's public header planted in it
# (the compiler must not find the header), then the same with a private
# header of a higher layer.
#
# usage: tests/lint/layer_build_test.sh SOURCE_DIR [CMAKE_ARGS...]
set -euo pipefail
src=$1; shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$src/planner" "$tmp/planner"
rm -rf "$tmp/planner/cli"
build() {  # build the io layer of the copy; stdout+stderr into $tmp/log
  cmake -S "$tmp/planner" -B "$tmp/build" -G Ninja "$@" > "$tmp/log" 2>&1 &&
    cmake --build "$tmp/build" --target remat_io >> "$tmp/log" 2>&1
}
if ! build "$@"; then
  echo "layer_build_test: the io layer of an unchanged copy does not build:"; cat "$tmp/log"; exit 1
fi
plant() {  # plant HEADER [CMAKE_ARGS]: an io source including it; the build must not find it
  local header=$1; shift
  printf '#include "%s"\n' "$header" > "$tmp/planner/src/io/planted_upward.cc"
  if build "$@"; then
    echo "layer_build_test: an io source including $header built; the layers are not enforced"
    exit 1
  fi
  # GCC says "HEADER: No such file or directory", Clang "'HEADER' file not found".
  if ! grep -qE "$header: No such file|'$header' file not found" "$tmp/log"; then
    echo "layer_build_test: the planted build failed, but not for want of $header:"; cat "$tmp/log"; exit 1
  fi
  echo "layer_build_test: io including $header fails to build, as it should"
}
plant remat/report/report.h "$@"
plant solver/chain_terms.h "$@"
