#!/usr/bin/env bash
# Builds everything and runs every test: the README's second command and
# CI's main job, after scripts/install-deps.sh --references chromium.
# Configures with the runtime (REMAT_RUNTIME=ON: no LibTorch is an error,
# not a quiet build without it), builds, runs ctest, then fails on any test
# that was skipped and that .ci/allowed-skips does not allow
# (scripts/check-skips.sh): a skipped test checked nothing.
#   scripts/build-and-test.sh [BUILD_DIR]      (default build)
# ctest's output is kept in BUILD_DIR/ctest.log.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
t0=$(date +%s)
# The test executables compile at -O0 (REMAT_TESTS_O0; the planner and the
# runtime they test keep their optimization): a third less compile time.
cmake -S . -B "$build" -G Ninja -DREMAT_RUNTIME=ON -DREMAT_TESTS_O0=ON
cmake --build "$build" -j2
t1=$(date +%s)
echo "build-and-test: built in $((t1 - t0)) s"
ctest --test-dir "$build" --output-on-failure -j2 2>&1 | tee "$build/ctest.log"
echo "build-and-test: tests in $(($(date +%s) - t1)) s"
scripts/check-skips.sh "$build/ctest.log"
