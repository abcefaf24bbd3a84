#!/usr/bin/env bash
# `fatpack prune` on NVIDIA's own shared libraries from PyPI (nobody relinks these): file
# size, du, device bytes, time and peak memory for --for 9.0, --for 8.0,9.0 and --dead.
#   bash bench/prune_real.sh [WORKDIR]      (downloads nvidia-cublas, -cusparse, -cufft)
# The same libraries as the CUDA 13.0 toolkit on the GPU machine are pinned too (cuSPARSE
# 12.6, cuFFT 12.0), beside the newest.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
W=${1:-$(mktemp -d)}
mkdir -p "$W/dl" "$W/x"
F=${FATPACK:-$root/target/release/fatpack}
[ -x "$F" ] || (cd "$root" && cargo build --release --locked)
[ -x "$W/venv/bin/pip" ] || python3 -m venv "$W/venv"
for spec in nvidia-cublas nvidia-cusparse nvidia-cufft nvidia-cusparse==12.6.3.3 nvidia-cufft==12.0.0.61; do
  "$W/venv/bin/pip" download -q --no-deps --only-binary=:all: -d "$W/dl" "$spec"
done
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
echo "fatpack: $($F --version | head -1) ($(git -C "$root" rev-parse --short HEAD))"
# shellcheck source=bench/prune_measure.sh
source "$root/bench/prune_measure.sh"
for whl in "$W"/dl/*.whl; do
  v=$(basename "$whl" | cut -d- -f2)
  rm -rf "$W/x/$v" && mkdir -p "$W/x/$v"
  python3 -m zipfile -e "$whl" "$W/x/$v"
  for lib in $(find "$W/x/$v" -name 'lib*.so.*' -size +20M | sort); do
    for mode in "--for 9.0" "--for 8.0,9.0" "--dead"; do
      # shellcheck disable=SC2086
      measure "$(basename "$lib") $v" "$lib" $mode
    done
  done
done
