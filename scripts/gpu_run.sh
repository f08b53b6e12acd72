#!/usr/bin/env bash
# The GPU session's one script. On the GPU machine (from the repository root):
# build remat against the machine's CUDA LibTorch (PyTorch's CMake prefix),
# run the GPU tests, then for each bench/models/h200-*.json: profile it on
# the GPU, plan it at several budgets, train a few steps of every plan, check
# that --memory-limit stops `none` below its peak, and write everything under
# $OUT (default ./gpu-out): env.txt, configure.log, build.log, gpu_tests.txt,
# profiles/h200-*.json, plans/, runs/, log.txt and report.md.
#
# Prepare here (a machine with apt), once: scripts/gpu_run.sh --fetch-debs
#   downloads the .debs the GPU machine may lack (Boost, nlohmann_json,
#   GoogleTest) into .debs/ (git-ignored); carry it to the GPU machine.
# Then, with the device tool:
#   run(command="bash scripts/gpu_run.sh", carry=[".debs"], timeout_s=590)
# The script stops starting new work after DEADLINE_S seconds (default 540)
# and always writes report.md from what it has. Commit profiles/h200-*.json
# and the report afterwards.
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--fetch-debs" ]; then
  mkdir -p .debs
  (cd .debs && apt-get download libboost1.74-dev libboost-graph1.74-dev nlohmann-json3-dev \
     libgtest-dev)
  ls -la .debs
  exit 0
fi

start=$(date +%s)
deadline=${DEADLINE_S:-540}
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT/profiles" "$OUT/plans" "$OUT/runs"
log() { echo "[$(($(date +%s) - start))s] $*" | tee -a "$OUT/log.txt"; }
time_left() { echo $((deadline - ($(date +%s) - start))); }
report() {
  python3 scripts/gpu_report.py "$OUT" > "$OUT/report.md" 2>> "$OUT/log.txt" ||
    log "report.md: gpu_report.py failed"
  log "done; report at $OUT/report.md"
}
trap report EXIT

# 1. What the machine has.
{
  echo "## boost / nlohmann headers"; ls -d /usr/include/boost /usr/include/nlohmann 2>&1
  echo "## compilers"; g++ --version | head -1; nvcc --version 2>&1 | tail -2
  echo "## build tools"; cmake --version 2>&1 | head -1; ninja --version 2>&1; nproc
  echo "## GPU"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
  echo "## PyTorch"
  python3 -c 'import torch; print(torch.__version__, torch.utils.cmake_prefix_path,
"cxx11_abi", torch.compiled_with_cxx11_abi(), "cuda", torch.version.cuda,
torch.cuda.is_available())' 2>&1
} > "$OUT/env.txt" 2>&1
log "environment: $(grep -A1 '## PyTorch' "$OUT/env.txt" | tail -1)"

# 2. Carried packages, unpacked into a prefix of their own (not /).
deps=/tmp/remat-deps
extra=()
if ls .debs/*.deb > /dev/null 2>&1; then
  mkdir -p "$deps"
  for d in .debs/*.deb; do
    if command -v dpkg > /dev/null; then
      dpkg -x "$d" "$deps"
    else
      (t=$(mktemp -d) && cd "$t" && ar x "$OLDPWD/$d" && tar -xf data.tar.* -C "$deps" && rm -rf "$t")
    fi
  done
  lib="$deps/usr/lib/x86_64-linux-gnu/cmake"
  [ -d "$lib/Boost-1.74.0" ] && extra+=("-DBoost_DIR=$lib/Boost-1.74.0")
  [ -d "$deps/usr/share/cmake/nlohmann_json" ] &&
    extra+=("-Dnlohmann_json_DIR=$deps/usr/share/cmake/nlohmann_json")
  [ -d "$lib/GTest" ] && extra+=("-DGTest_DIR=$lib/GTest")
  log "unpacked $(ls .debs/*.deb | wc -l) carried packages into $deps"
fi
tests=OFF
if [[ " ${extra[*]} " == *GTest_DIR* ]] || [ -d /usr/include/gtest ]; then tests=ON; fi

# 3. Configure and build against PyTorch's CUDA LibTorch.
prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
generator="Unix Makefiles"
command -v ninja > /dev/null && generator=Ninja
nvcc_path=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
cuda_root=$(dirname "$(dirname "$nvcc_path")")
cmake -S . -B build-gpu -G "$generator" -DCMAKE_BUILD_TYPE=Release -DREMAT_RUNTIME=ON \
  -DREMAT_BUILD_BENCH=OFF -DREMAT_BUILD_TESTS=$tests -DCMAKE_PREFIX_PATH="$prefix" \
  -DCUDAToolkit_ROOT="$cuda_root" -DCMAKE_CUDA_COMPILER="$nvcc_path" \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DTORCH_CUDA_ARCH_LIST=9.0 "${extra[@]}" \
  > "$OUT/configure.log" 2>&1 || { log "configure failed (configure.log)"; exit 1; }
grep -q "CUDA LibTorch found" "$OUT/configure.log" ||
  log "WARNING: no CUDA LibTorch target (torch_cuda); the cuda runs will be refused"
targets=(planner)
[ "$tests" = ON ] && targets+=(gpu_tests)
cmake --build build-gpu -j"$(nproc)" --target "${targets[@]}" > "$OUT/build.log" 2>&1 ||
  { log "build failed (build.log): $(grep -m3 -E 'error' "$OUT/build.log")"; exit 1; }
log "built ${targets[*]}"
planner=build-gpu/bin/planner
"$planner" --version | tee -a "$OUT/log.txt"

# 4. GPU unit tests.
if [ -x build-gpu/bin/gpu_tests ]; then
  build-gpu/bin/gpu_tests > "$OUT/gpu_tests.txt" 2>&1
  log "gpu_tests: exit $? ($(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$OUT/gpu_tests.txt" | tr '\n' ' '))"
fi

# 5. Profile, plan at several budgets, train.
train() {  # plan-name model [extra train flags...]
  local name=$1 model=$2
  shift 2
  "$planner" train --runtime-device cuda --plan "$OUT/plans/$name.json" --steps 5 --json "$@" \
    "$model" > "$OUT/runs/$name.json" 2> "$OUT/runs/$name.err"
  local rc=$?
  echo "$rc" > "$OUT/runs/$name.rc"
  log "train $name: exit $rc $(head -c 300 "$OUT/runs/$name.err")"
}
for model in bench/models/h200-*.json; do
  name=$(basename "$model" .json)
  [ "$(time_left)" -gt 120 ] || { log "skipping $name: out of time"; continue; }
  profile="$OUT/profiles/$name.json"
  "$planner" profile --runtime-device cuda --repeats 5 -o "$profile" "$model" \
    > /dev/null 2> "$OUT/profiles/$name.err" || { log "profile $name failed: $(cat "$OUT/profiles/$name.err")"; continue; }
  log "profiled $name"
  "$planner" --strategy none -o "$OUT/plans/$name-none.json" "$profile" > /dev/null
  peak=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["predicted"]["peak_bytes"])' \
    "$OUT/plans/$name-none.json")
  train "$name-none" "$model"
  for pct in 80 60 45; do
    [ "$(time_left)" -gt 40 ] || { log "skipping $name at $pct%: out of time"; continue; }
    budget=$((peak * pct / 100))
    if "$planner" --budget "${budget}B" -o "$OUT/plans/$name-b$pct.json" "$profile" \
         > /dev/null 2> "$OUT/plans/$name-b$pct.err"; then
      train "$name-b$pct" "$model"
    else
      log "no plan for $name at $pct% of its peak: $(head -1 "$OUT/plans/$name-b$pct.err")"
    fi
  done
  # `none` under the 60% budget as a hard limit must stop with exit code 4.
  if [ -f "$OUT/plans/$name-b60.json" ] && [ "$(time_left)" -gt 30 ]; then
    cp "$OUT/plans/$name-none.json" "$OUT/plans/$name-none-limited.json"
    train "$name-none-limited" "$model" --memory-limit "$((peak * 60 / 100))B"
  fi
done
