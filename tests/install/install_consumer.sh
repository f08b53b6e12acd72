#!/usr/bin/env bash
# remat as an installed C++ library (cmake/RematInstall.cmake): installs the
# build into WORK/stage, checks what was installed (exactly the headers of
# planner/include and visualize/include, no path of the source or build tree
# in the package files), moves the prefix elsewhere (it must be relocatable),
# then configures, builds and runs examples/consumer against it with
# find_package(remat), and compiles every installed header there. WORK is
# emptied first and left for inspection.
#   tests/install/install_consumer.sh CMAKE SOURCE_DIR BUILD_DIR WORK CXX GENERATOR [MAKE_PROGRAM]
set -uo pipefail
usage="usage: install_consumer.sh CMAKE SOURCE_DIR BUILD_DIR WORK CXX GENERATOR [MAKE_PROGRAM]"
cmake=${1:?$usage}
source_dir=${2:?$usage}
build_dir=${3:?$usage}
work=${4:?$usage}
cxx=${5:?$usage}
generator=${6:?$usage}
make_program=${7:-}
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

rm -rf "$work" && mkdir -p "$work" || exit 1
"$cmake" --install "$build_dir" --prefix "$work/stage" > "$work/install.log" ||
  { cat "$work/install.log"; echo "FAIL: cmake --install"; exit 1; }

# The public headers, all of them and nothing else (planner/src and
# visualize/src hold the private ones).
(cd "$source_dir/planner/include" && find remat -name '*.h'
 cd "$source_dir/visualize/include" && find remat -name '*.h') | sort > "$work/public.txt"
(cd "$work/stage/include" && find . -type f | sed 's|^\./||') | sort > "$work/installed.txt"
diff "$work/public.txt" "$work/installed.txt" > "$work/headers.diff" ||
  fail "installed headers differ from planner/include + visualize/include (< missing, > extra): $(cat "$work/headers.diff")"

package=$(dirname "$(find "$work/stage" -name remat-config.cmake | head -n 1)")
for f in remat-config.cmake remat-config-version.cmake remat-targets.cmake; do
  [ -f "$package/$f" ] || fail "no $f installed"
done
# Relocatable: no absolute path of the trees it was built from (a leaked
# BUILD_INTERFACE or PRIVATE include directory would be one).
for tree in "$source_dir" "$build_dir"; do
  if grep -rlF "$tree" "$package" > "$work/leaks.txt"; then
    fail "the package names $tree in: $(tr '\n' ' ' < "$work/leaks.txt")"
  fi
done
[ "$failures" -eq 0 ] || exit 1

mv "$work/stage" "$work/prefix" || exit 1
# Configures and builds the project in $1 into $2 against the moved prefix.
build_against_prefix() {
  local args=(-S "$1" -B "$2" -G "$generator" -DCMAKE_CXX_COMPILER="$cxx"
              -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
  [ -n "$make_program" ] && args+=(-DCMAKE_MAKE_PROGRAM="$make_program")
  "$cmake" "${args[@]}" && "$cmake" --build "$2"
}
build_against_prefix "$source_dir/examples/consumer" "$work/consumer" > "$work/consumer.log" 2>&1 ||
  { cat "$work/consumer.log"; echo "FAIL: configuring or building examples/consumer"; exit 1; }
grep -q "remat_DIR:PATH=$work/prefix/" "$work/consumer/CMakeCache.txt" ||
  fail "find_package(remat) did not find the moved prefix: $(grep remat_DIR "$work/consumer/CMakeCache.txt")"
consumer=$work/consumer/remat_consumer

# Every installed header compiles on its own prefix: one that includes a
# private header (planner/src) would fail here, also when no program of ours
# includes it. Linked with remat::visualize, the other exported target.
mkdir -p "$work/headers" || exit 1
sed 's|.*|#include "&"|' "$work/installed.txt" > "$work/headers/all_headers.cc"
echo 'int main() { return 0; }' >> "$work/headers/all_headers.cc"
cat > "$work/headers/CMakeLists.txt" << 'CMAKE'
cmake_minimum_required(VERSION 3.22)
project(remat_headers LANGUAGES CXX)
find_package(remat 0.1 REQUIRED)
add_executable(all_headers all_headers.cc)
target_link_libraries(all_headers PRIVATE remat::visualize)
CMAKE
build_against_prefix "$work/headers" "$work/headers/build" > "$work/headers.log" 2>&1 ||
  fail "the installed headers do not compile on their own prefix: $(grep -m 3 -E 'error|Error' "$work/headers.log")"

# The plan the README shows for this model and budget (optimal-single);
# any strategy name is accepted here, the planner's own tests pin the choice.
model=$source_dir/examples/gpt2-small.json
"$consumer" "$model" 24GB > "$work/out.txt" 2> "$work/err.txt"
code=$?
[ "$code" -eq 0 ] || fail "consumer at 24GB: exit $code, expected 0: $(cat "$work/err.txt")"
grep -Eq '^strategy: (none|uniform|segment|selective|manual|optimal|optimal-single|offload)$' "$work/out.txt" ||
  fail "consumer at 24GB names no strategy: $(cat "$work/out.txt")"
grep -Eq '^predicted peak: .* \([0-9]+ bytes\)$' "$work/out.txt" ||
  fail "consumer at 24GB prints no peak: $(cat "$work/out.txt")"
grep -qx 'fits: yes' "$work/out.txt" || fail "consumer at 24GB: the plan does not fit: $(cat "$work/out.txt")"

# Nothing fits 1GB (the model state alone is 1.39 GiB): exit 3, the plan still printed.
"$consumer" "$model" 1GB > "$work/out.txt" 2> /dev/null
code=$?
[ "$code" -eq 3 ] || fail "consumer at 1GB: exit $code, expected 3"
grep -qx 'fits: no' "$work/out.txt" || fail "consumer at 1GB: $(cat "$work/out.txt")"

# Bad input: exit 2, one line naming the file.
"$consumer" "$work/missing.json" > /dev/null 2> "$work/err.txt"
code=$?
[ "$code" -eq 2 ] || fail "missing input: exit $code, expected 2"
[ "$(wc -l < "$work/err.txt")" -eq 1 ] && grep -qF "$work/missing.json" "$work/err.txt" ||
  fail "missing input: stderr was: $(cat "$work/err.txt")"

[ "$failures" -eq 0 ] && echo "install_consumer: ok"
[ "$failures" -eq 0 ]
