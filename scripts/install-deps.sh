#!/usr/bin/env bash
# Installs what remat needs to build and test on Debian 12 (bookworm).
# Used by README.md and .ci/run. Safe to run again.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache git
  nlohmann-json3-dev     # JSON input/output
  libboost-graph-dev     # model graph, chain derivation, liveness
  libgtest-dev           # unit tests
  libbenchmark-dev       # benchmarks
  libtorch-dev           # runtime: execute plans on a real transformer (CPU)
  zlib1g-dev             # PNG checks in the report's browser test
  libopenblas0-pthread   # fast BLAS for LibTorch (the default reference BLAS is ~15x slower)
)
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
