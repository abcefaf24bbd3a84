#!/usr/bin/env bash
# `fatpack prune` on NVIDIA's own shared libraries from PyPI (nobody relinks these): file
# size, du, device bytes, time and peak memory for --for 9.0, --for 8.0,9.0 and --dead.
#   bash bench/prune_real.sh [WORKDIR]      (downloads nvidia-cublas, -cusparse, -cufft)
# The same libraries as the CUDA 13.0 toolkit on the GPU machine are pinned too (cuSPARSE
# 12.6, cuFFT 12.0), beside the newest; then whole wheels (cuSPARSE, torch 2.11) pruned as
# wheels and installed with pip into a fresh venv.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
W=${1:-$(mktemp -d)}
mkdir -p "$W/dl" "$W/x"
F=${FATPACK:-$root/target/release/fatpack}
[ -x "$F" ] || (cd "$root" && cargo build --release --locked)
[ -x "$W/venv/bin/pip" ] || python3 -m venv "$W/venv"
for spec in nvidia-cublas nvidia-cusparse nvidia-cufft nvidia-cusparse==12.6.3.3 nvidia-cufft==12.0.0.61 torch==2.11.0; do
  "$W/venv/bin/pip" download -q --no-deps --only-binary=:all: -d "$W/dl" "$spec"
done
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2)"
echo "fatpack: $($F --version | head -1) ($(git -C "$root" rev-parse --short HEAD))"
# shellcheck source=bench/prune_measure.sh
source "$root/bench/prune_measure.sh"
for whl in "$W"/dl/nvidia*.whl; do
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

echo "== wheels: fatpack prune --for 9.0 IN.whl -o DIR, then pip install --no-deps into a fresh venv"
for whl in "$W"/dl/nvidia_cusparse-12.9*.whl "$W"/dl/torch-*.whl; do
  rm -rf "$W/out" "$W/venv2" && mkdir "$W/out"
  /usr/bin/time -f "%e %M" -o "$W/time" "$F" prune --for 9.0 "$whl" -o "$W/out" 2>"$W/log"
  read -r secs kb < "$W/time"
  out=$(ls "$W"/out/*.whl)
  python3 -m venv "$W/venv2"
  "$W/venv2/bin/pip" install -q --no-deps --disable-pip-version-check "$out"
  printf '%s: %.1f MB -> %s: %.1f MB (%.3f), %s s, peak %d MB; pip installs it as %s\n' \
    "$(basename "$whl")" "$(stat -c %s "$whl" | awk '{print $1/1e6}')" "$(basename "$out")" \
    "$(stat -c %s "$out" | awk '{print $1/1e6}')" \
    "$(echo "$(stat -c %s "$out") $(stat -c %s "$whl")" | awk '{print $1/$2}')" "$secs" "$((kb / 1024))" \
    "$("$W/venv2/bin/pip" list 2>/dev/null | awk 'NR > 2 {print $1 "==" $2}' | tr '\n' ' ')"
done
