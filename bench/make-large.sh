#!/usr/bin/env bash
# Builds the synthetic large input for the store benchmarks: N translation units of
# heavily unrolled kernels, compiled by real nvcc 13.0 for sm_75/80/86/90 + compute_90,
# uncompressed (--compress-mode=none) and, for comparison, with nvcc's own compression.
#   bash bench/make-large.sh OUTDIR [N=8]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/../scripts/cuda-env.sh"
out="$1"; n="${2:-8}"
mkdir -p "$out"
G="-gencode arch=compute_75,code=sm_75 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_86,code=sm_86 -gencode arch=compute_90,code=[sm_90,compute_90]"
for i in $(seq 1 "$n"); do
    [ -f "$out/big$i.cu" ] || python3 "$here/gen_kernels.py" 8 "$i" > "$out/big$i.cu"
done
build() {
    i=$1
    [ -f "$out/big$i.none.o" ] || nvcc $G --compress-mode=none -c "$out/big$i.cu" -o "$out/big$i.none.o"
    # nvcc's compressed forms are repacked from the same cubins with fatbinary, not recompiled.
}
export -f build; export out G
seq 1 "$n" | xargs -P "$(nproc)" -I{} bash -c 'build {}'
