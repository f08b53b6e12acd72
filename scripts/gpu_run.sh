#!/usr/bin/env bash
# Runs the GPU checks and writes profiles/ and the report. On a machine with
# a CUDA device (from the repository root): builds remat against the
# machine's own PyTorch (its CUDA LibTorch, found through `python3`'s torch
# package), runs the GPU tests, then the fidelity matrix on CUDA
# (bench/fidelity/fidelity.sh with DEVICE=cuda over bench/fidelity/models/h200-*.json:
# profile, plan every strategy, train, compare), and for each model a budget
# sweep (the auto plan at 80/60/45% of the `none` peak, trained) and a check
# that --memory-limit stops `none` below its peak (exit 4). Before building,
# it measures what the card holds besides tensors (device.json: the CUDA
# context from torch.cuda.mem_get_info before and after init, and cuBLAS's
# workspaces); the budget sweep's plans predict the caching allocator's
# reserved peak, so the report can set the measured reserved against it and
# write profiles/h200-device.json, the device memory preset in the units of
# planner/src/device/devices.cc. Everything goes under $OUT (default
# ./gpu-out): env.txt, device.json, configure.log, build.log,
# gpu_tests.txt, fidelity.txt, fidelity/, profiles/h200-*.json, plans/,
# runs/, log.txt and report.md (scripts/gpu_report.py writes it).
#
# A GPU machine without network access: on a machine with apt and PyPI, run
#   scripts/gpu_run.sh --fetch
# once; it downloads what the GPU machine may lack into .debs/ (git-ignored):
# the .debs of Boost, nlohmann_json and GoogleTest, and the cmake and ninja
# wheels from PyPI (used only where the machine has no cmake / ninja). Copy
# .debs/ beside the checkout there and run `bash scripts/gpu_run.sh`.
# The script stops starting new work after DEADLINE_S seconds (default 500)
# and always writes report.md from what it has. The files to keep, from OUT:
# profiles/h200-gpt2*.json as profiles/fixtures/h200-gpt2*.measured.json,
# profiles/h200-device.json as profiles/results/devices/h200.json and
# report.md as profiles/results/gpu-h200-report.md.
#
# Beside the build (the GPU idles while it compiles), the reference
# libraries run the same jobs on the GPU: bench/fidelity/hf_reference.py --device
# cuda over HF_CONFIGS (distilroberta-base with MNRL on 128 triplets x 75
# tokens in fp16 AMP, and the small llama / bert / MiniLM configs of
# bench/fidelity/hf_fidelity.sh), without and with gradient_checkpointing_enable();
# after the build remat's runtime trains the same configs on CUDA (strategy
# none and every layer checkpointed), into refs/ and hf-runs/.
#
# Beside them, scripts/record_allocator_trace.py records what PyTorch's
# caching allocator does with each committed allocator trace, into
# alloc-traces/ (keep them as profiles/fixtures/alloc-traces/*.trace.json;
# tests/planner/device/allocator/recorded_traces_test.cc then compares).
#
# SKIP_REFS=1: not the references (a rerun after a fix in remat).
# SKIP_TRACES=1: not the allocator traces.
# After the build, FSDP2 trains with one rank on the GPU (NCCL) through
# `python -m remat train --engine fsdp2 --nproc 1`: fsdp2-one-rank.json
# (the package's extension is built with the machine's Python; nanobind
# carried in .debs/wheels where it lacks it).
# PACK=1: at the end everything but
# report.md and log.txt goes into $OUT/gpu-out.tar.gz.
# PREBUILT=DIR: where configure or the build fails, use DIR/bin/planner and
# DIR/lib/libremat_runtime.so built elsewhere against the same torch (the
# machine's torch/lib on LD_LIBRARY_PATH).
#
# ONLY=context: measure the context and workspaces, write the report, stop
# (a minute of device time; also the rehearsal on a machine without a GPU).
# ONLY=traces: measure the context and record the allocator traces, stop.
# env: OUT, DEADLINE_S, PYTHON (python3: the Python whose torch is used),
#      BUILD_DIR (build-gpu), BUILD_TYPE (Release), JOBS (nproc),
#      USE_CARRIED (1: the carried packages even where the machine has its own)
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--fetch" ] || [ "${1:-}" = "--fetch-debs" ]; then
  set -e
  mkdir -p .debs/wheels
  (cd .debs && apt-get download libboost1.74-dev libboost-graph1.74-dev nlohmann-json3-dev \
     libgtest-dev)
  python=${PYTHON:-python3}
  "$python" -m pip download --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 -d .debs/wheels \
    "cmake>=3.22,<4" ninja
  "$python" -m pip download --disable-pip-version-check --no-deps --only-binary=:all: \
    -d .debs/wheels nanobind
  du -sh .debs
  ls -la .debs .debs/wheels
  exit 0
fi

start=$(date +%s)
deadline=${DEADLINE_S:-500}
OUT=${OUT:-$PWD/gpu-out}
python=${PYTHON:-python3}
build=${BUILD_DIR:-build-gpu}
mkdir -p "$OUT/profiles" "$OUT/plans" "$OUT/runs"
log() { echo "[$(($(date +%s) - start))s] $*" | tee -a "$OUT/log.txt"; }
time_left() { echo $((deadline - ($(date +%s) - start))); }
report() {
  "$python" scripts/gpu_report.py "$OUT" > "$OUT/report.md" 2>> "$OUT/log.txt" ||
    log "report.md: gpu_report.py failed"
  log "done; report at $OUT/report.md"
  if [ "${PACK:-0}" = 1 ]; then
    tar -C "$OUT" -czf /tmp/gpu-out.tar.gz --exclude=./gpu-out.tar.gz . &&
      find "$OUT" -mindepth 1 -maxdepth 1 ! -name report.md ! -name log.txt \
        -exec rm -rf {} + && mv /tmp/gpu-out.tar.gz "$OUT/"
  fi
}
trap report EXIT

# 1. What the machine has.
{
  echo "## boost / nlohmann headers"; ls -d /usr/include/boost /usr/include/nlohmann 2>&1
  echo "## compilers"; g++ --version | head -1; nvcc --version 2>&1 | tail -2
  echo "## build tools"; cmake --version 2>&1 | head -1; ninja --version 2>&1; nproc
  echo "## GPU"; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1
  echo "## PyTorch ($python)"
  "$python" -W ignore -c 'import torch; print(torch.__version__, torch.utils.cmake_prefix_path,
"cxx11_abi", torch.compiled_with_cxx11_abi(), "cuda", torch.version.cuda,
torch.cuda.is_available())' 2>&1
} > "$OUT/env.txt" 2>&1
log "environment: $(grep -A1 '## PyTorch' "$OUT/env.txt" | tail -1)"

# 1b. The CUDA context and the library workspaces: device memory in use
#     (nvidia-smi) before this process, free memory after torch's CUDA init,
#     then after a GEMM forward and its backward (autograd's own thread gets
#     its own cuBLAS handle and workspace). Fails with one line without a GPU.
used_before=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2> /dev/null |
  head -1 | tr -dc 0-9)
"$python" -W ignore - "${used_before:-}" > "$OUT/device.json" 2> "$OUT/device.err" <<'PY'
import json, sys
import torch
if not torch.cuda.is_available():
    sys.exit("no CUDA device: torch.cuda.is_available() is False (torch %s)" % torch.__version__)
used_before = int(sys.argv[1]) * 2**20 if len(sys.argv) > 1 and sys.argv[1] else 0
def outside():  # device bytes in use that torch's allocator does not hold
    free, total = torch.cuda.mem_get_info()
    return total - free - used_before - torch.cuda.memory_reserved(), total
one = torch.zeros(1, device="cuda")
torch.cuda.synchronize()
context_init, total = outside()
a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16, requires_grad=True)
(a @ a).float().sum().backward()
torch.cuda.synchronize()
context, _ = outside()
live = sum((t.nbytes + 511) // 512 * 512 for t in (one, a, a.grad))
print(json.dumps({
    "device": torch.cuda.get_device_name(), "torch": torch.__version__,
    "cuda": torch.version.cuda, "total_bytes": total,
    "used_before_bytes": used_before, "context_at_init_bytes": context_init,
    "cuda_context_bytes": context,
    "workspace_bytes": torch.cuda.memory_allocated() - live,
    "reserved_after_gemm_bytes": torch.cuda.memory_reserved()}, indent=1))
PY
context_rc=$?
if [ $context_rc -eq 0 ]; then
  log "cuda context and workspaces: $(tr -d '\n' < "$OUT/device.json")"
else
  log "cuda context: not measured: $(tail -1 "$OUT/device.err")"
  rm -f "$OUT/device.json"
fi
[ "${ONLY:-}" = context ] && exit $context_rc

# 1c. Code no one here wrote, on the GPU, while remat compiles.
hf_configs=(${HF_CONFIGS:-examples/hf/distilroberta-base.mnrl.config.json
  bench/fidelity/models/hf/llama-gqa-s.config.json bench/fidelity/models/hf/bert-mlm-s.config.json
  bench/fidelity/models/hf/all-minilm-l6-v2.mnrl.config.json})
mkdir -p "$OUT/refs" "$OUT/hf-runs"
references() {
  for config in "${hf_configs[@]}"; do
    local name
    name=$(basename "$config" .config.json)
    for mode in none every-layer; do
      flag=()
      [ $mode = every-layer ] && flag=(--checkpointing)
      timeout 120 "$python" -W ignore bench/fidelity/hf_reference.py "$config" "${flag[@]}" --steps 3 \
        --device cuda > "$OUT/refs/$name-$mode.json" 2> "$OUT/refs/$name-$mode.err"
      log "reference $name $mode: exit $? $(head -c 400 "$OUT/refs/$name-$mode.json")"
    done
  done
}
refs_pid=
if [ $context_rc -eq 0 ] && [ "${SKIP_REFS:-0}" != 1 ]; then
  references &
  refs_pid=$!
fi

# 1d. The allocator traces (profiles/fixtures/alloc-traces/, written by
#     scripts/make_allocator_traces.sh), each replayed through PyTorch's
#     caching allocator in a process of its own (PYTORCH_CUDA_ALLOC_CONF is
#     read once), beside the references: alloc-traces/ holds them with
#     "measured" added, to commit in place of the fixtures.
record_traces() {
  local t name
  mkdir -p "$OUT/alloc-traces"
  for t in profiles/fixtures/alloc-traces/*.trace.json; do
    name=$(basename "$t")
    timeout 120 "$python" scripts/record_allocator_trace.py "$t" "$OUT/alloc-traces/$name" \
      > "$OUT/alloc-traces/$name.log" 2>&1
    log "allocator trace $name: exit $? $(tail -1 "$OUT/alloc-traces/$name.log")"
  done
}
if [ "${ONLY:-}" = traces ]; then
  record_traces
  exit 0
fi
traces_pid=
if [ $context_rc -eq 0 ] && [ "${SKIP_TRACES:-0}" != 1 ]; then
  record_traces &
  traces_pid=$!
fi

# 2. Carried packages, unpacked into a prefix of their own (not /); carried
#    cmake / ninja wheels only where the machine has none.
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
  # What the machine has is used as it is (USE_CARRIED=1: the carried ones).
  need() { [ "${USE_CARRIED:-0}" = 1 ] || [ ! -e "$1" ]; }
  need /usr/include/boost/graph && [ -d "$lib/Boost-1.74.0" ] &&
    extra+=("-DBoost_DIR=$lib/Boost-1.74.0")
  need /usr/include/nlohmann/json.hpp && [ -d "$deps/usr/share/cmake/nlohmann_json" ] &&
    extra+=("-Dnlohmann_json_DIR=$deps/usr/share/cmake/nlohmann_json")
  need /usr/include/gtest/gtest.h && [ -d "$lib/GTest" ] && extra+=("-DGTest_DIR=$lib/GTest")
  log "unpacked $(ls .debs/*.deb | wc -l) carried packages into $deps; using: ${extra[*]:-none}"
fi
for tool in cmake ninja; do
  command -v "$tool" > /dev/null && continue
  wheel=$(ls .debs/wheels/"$tool"-*.whl 2> /dev/null | head -1)
  [ -n "$wheel" ] || continue
  "$python" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
    "$wheel" "$deps/wheels/$tool"
  bin=$(dirname "$(find "$deps/wheels/$tool" -path "*/bin/$tool" -type f | head -1)")
  chmod +x "$bin"/* 2> /dev/null
  export PATH="$bin:$PATH"
  log "using the carried $tool: $("$tool" --version | head -1)"
done
# nanobind (pure Python) for the package's extension, where the Python lacks it.
if ! "$python" -m nanobind --cmake_dir > /dev/null 2>&1; then
  wheel=$(ls .debs/wheels/nanobind-*.whl 2> /dev/null | head -1)
  if [ -n "$wheel" ]; then
    "$python" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
      "$wheel" "$deps/wheels/nanobind"
    export PYTHONPATH="$deps/wheels/nanobind${PYTHONPATH:+:$PYTHONPATH}"
    log "using the carried nanobind: $("$python" -m nanobind --version 2>&1)"
  fi
fi
tests=OFF
if [[ " ${extra[*]} " == *GTest_DIR* ]] || [ -d /usr/include/gtest ]; then tests=ON; fi

# 3. Configure and build against the machine's PyTorch (CUDA LibTorch).
generator="Unix Makefiles"
command -v ninja > /dev/null && generator=Ninja
nvcc_path=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
use_prebuilt() {  # the build failed: DIR/bin/planner against this machine's torch
  local dir=${PREBUILT:-}
  [ -n "$dir" ] && [ -x "$dir/bin/planner" ] || { log "no PREBUILT planner to fall back on"; exit 1; }
  local torch_lib
  torch_lib=$("$python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')
  export LD_LIBRARY_PATH="$torch_lib:$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export REMAT_RUNTIME_MODULE="$PWD/$dir/lib/libremat_runtime.so"
  build=$dir
  log "using the prebuilt $dir/bin/planner (LD_LIBRARY_PATH $torch_lib)"
}
jobs=${JOBS:-$(nproc)}
if cmake -S . -B "$build" -G "$generator" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" \
  -DREMAT_RUNTIME=ON -DREMAT_TORCH_CUDA=ON -DREMAT_PYTHON="$(command -v "$python")" \
  -DREMAT_BUILD_BENCH=OFF -DREMAT_BUILD_TESTS=$tests -DCMAKE_CUDA_COMPILER="$nvcc_path" \
  -DTORCH_CUDA_ARCH_LIST=9.0 "${extra[@]}" > "$OUT/configure.log" 2>&1; then
  grep -q "CUDA LibTorch found" "$OUT/configure.log" ||
    log "WARNING: no CUDA LibTorch target (torch_cuda); the cuda runs will be refused"
  if cmake --build "$build" -j"$jobs" --target planner > "$OUT/build.log" 2>&1; then
    log "built planner and $build/lib/libremat_runtime.so"
    if [ "$tests" = ON ]; then
      cmake --build "$build" -j"$jobs" --target gpu_tests >> "$OUT/build.log" 2>&1 ||
        log "gpu_tests did not build (build.log): $(grep -m3 -E 'error' "$OUT/build.log")"
    fi
    if grep -q "Python package extension with" "$OUT/configure.log"; then
      cmake --build "$build" -j"$jobs" --target remat_python_core >> "$OUT/build.log" 2>&1 ||
        log "the Python extension did not build (build.log)"
    else
      log "no Python extension: $(grep -m1 'remat: .*python' "$OUT/configure.log")"
    fi
  else
    log "build failed (build.log): $(grep -m3 -E 'error' "$OUT/build.log")"
    use_prebuilt
  fi
else
  log "configure failed (configure.log): $(grep -m3 -E 'Error|error' "$OUT/configure.log")"
  use_prebuilt
fi
planner=$build/bin/planner
"$planner" --version | tee -a "$OUT/log.txt"

# 4. GPU unit tests.
if [ -x "$build/bin/gpu_tests" ]; then
  "$build/bin/gpu_tests" > "$OUT/gpu_tests.txt" 2>&1
  log "gpu_tests: exit $? ($(grep -E '^\[  (PASSED|FAILED|SKIPPED)' "$OUT/gpu_tests.txt" | tr '\n' ' '))"
fi

# 4b. remat's runtime on the references' configs (after them: one job on the
#     GPU at a time), strategy none and every layer checkpointed, planned
#     with the h200 preset.
[ -n "$refs_pid" ] && wait "$refs_pid"
[ -n "$traces_pid" ] && wait "$traces_pid"
for config in "${hf_configs[@]}"; do
  name=$(basename "$config" .config.json)
  for mode in none every-layer; do
    [ "$(time_left)" -gt 200 ] || { log "skipping remat's $name $mode: out of time"; continue; }
    strategy=(--strategy none)
    [ $mode = every-layer ] && strategy=(--strategy uniform --every 1)
    run="$OUT/hf-runs/$name-$mode"
    "$planner" --budget 1TB --device h200 "${strategy[@]}" --json --quiet -o "$run.plan.json" \
      "$config" > /dev/null 2> "$run.err" &&
      timeout 120 "$planner" train --runtime-device cuda --plan "$run.plan.json" --steps 3 --json \
        "$config" > "$run.json" 2>> "$run.err"
    log "remat runtime $name $mode: exit $? $(head -c 300 "$run.err")"
  done
done

# 4c. FSDP2 with one rank on the GPU (one NCCL rank): the plan made with
#     --gpus 1 --fsdp full_shard, trained by `python -m remat train --engine
#     fsdp2 --nproc 1` (torch.distributed.run, remat.apply), predicted
#     against measured (torch.cuda's peak) in fsdp2-one-rank.json.
fsdp_config=bench/fidelity/models/hf/llama-gqa-s.config.json
if ls "$build"/python/remat/_core*.so > /dev/null 2>&1 && [ "$(time_left)" -gt 150 ]; then
  "$planner" --budget 1TB --device h200 --gpus 1 --fsdp full_shard --strategy uniform --every 1 \
    --grad-accumulation 2 --json --quiet -o "$OUT/fsdp2-one-rank.plan.json" "$fsdp_config" \
    > /dev/null 2> "$OUT/fsdp2-one-rank.err" &&
    PYTHONPATH="$build/python:python${PYTHONPATH:+:$PYTHONPATH}" timeout 300 "$python" -m remat \
      train --engine fsdp2 --nproc 1 --plan "$OUT/fsdp2-one-rank.plan.json" "$fsdp_config" \
      --json > "$OUT/fsdp2-one-rank.json" 2>> "$OUT/fsdp2-one-rank.err"
  log "fsdp2 one rank: exit $? $(head -c 600 "$OUT/fsdp2-one-rank.json") $(tail -c 300 "$OUT/fsdp2-one-rank.err")"
else
  log "skipping fsdp2 with one rank: no Python extension or out of time"
fi

# 5. The fidelity matrix on CUDA: every strategy of every h200 model.
models=(bench/fidelity/models/h200-*.json)
limit=$(($(time_left) - 150))
if [ "$limit" -gt 60 ]; then
  DEVICE=cuda CLOCK=wall ROUNDS=1 STEPS=4 REPEATS=5 BUILD="$build" KEEP="$OUT/fidelity" \
    timeout "$limit" bench/fidelity/fidelity.sh "${models[@]}" > "$OUT/fidelity.txt" 2>&1
  log "fidelity: exit $? ($(tail -1 "$OUT/fidelity.txt"))"
else
  log "skipping the fidelity matrix: out of time"
fi

# 6. Budget sweep and the memory-limit check, from the fidelity run's profiles.
train() {  # plan-name model [extra train flags...]
  local name=$1 model=$2
  shift 2
  "$planner" train --runtime-device cuda --plan "$OUT/plans/$name.json" --steps 5 --json "$@" \
    "$model" > "$OUT/runs/$name.json" 2> "$OUT/runs/$name.err"
  local rc=$?
  echo "$rc" > "$OUT/runs/$name.rc"
  log "train $name: exit $rc $(head -c 300 "$OUT/runs/$name.err")"
}
for model in "${models[@]}"; do
  name=$(basename "$model" .json)
  profile="$OUT/profiles/$name.json"
  measured=$(ls "$OUT/fidelity/$name"-*-measured-round1/profile.json 2> /dev/null | head -1)
  if [ -n "$measured" ]; then
    cp "$measured" "$profile"
  else
    [ "$(time_left)" -gt 60 ] || { log "skipping $name: out of time"; continue; }
    "$planner" profile --runtime-device cuda --repeats 5 --statistic min -o "$profile" "$model" \
      > /dev/null 2> "$OUT/profiles/$name.err" ||
      { log "profile $name failed: $(cat "$OUT/profiles/$name.err")"; continue; }
  fi
  log "profile $name: $profile"
  # Zero context and workspaces: predicted.reserved_peak_bytes is the caching
  # allocator replayed over the plan's steps, which the measured reserved
  # peak is set against (gpu_report.py).
  rounding=(--cuda-context 0 --cuda-workspace 0)
  "$planner" --strategy none "${rounding[@]}" -o "$OUT/plans/$name-none.json" "$profile" \
    > /dev/null
  peak=$("$python" -c 'import json,sys; print(json.load(open(sys.argv[1]))["predicted"]["peak_bytes"])' \
    "$OUT/plans/$name-none.json")
  [ "$(time_left)" -gt 30 ] && train "$name-none" "$model"
  for pct in 80 60 45; do
    [ "$(time_left)" -gt 30 ] || { log "skipping $name at $pct%: out of time"; continue; }
    budget=$((peak * pct / 100))
    if "$planner" --budget "${budget}B" "${rounding[@]}" -o "$OUT/plans/$name-b$pct.json" \
         "$profile" \
         > /dev/null 2> "$OUT/plans/$name-b$pct.err"; then
      train "$name-b$pct" "$model"
    else
      log "no plan for $name at $pct% of its peak: $(head -1 "$OUT/plans/$name-b$pct.err")"
    fi
  done
  # `none` under the 60% budget as a hard limit must stop with exit code 4.
  if [ -f "$OUT/plans/$name-b60.json" ] && [ "$(time_left)" -gt 20 ]; then
    cp "$OUT/plans/$name-none.json" "$OUT/plans/$name-none-limited.json"
    train "$name-none-limited" "$model" --memory-limit "$((peak * 60 / 100))B"
  fi
done
