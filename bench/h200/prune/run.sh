#!/usr/bin/env bash
# Prunes real libraries nobody relinked, on the GPU machine, and checks they still compute
# the same: the CUDA toolkit's libcublas/libcublasLt/libcusparse/libcufft and the PyTorch
# wheel's torch/lib. Prints one table of sizes, du, device bytes, time and peak memory per
# prune (--for 9.0, --for 8.0,9.0, --dead), then the results of a cuBLAS/cuBLASLt/cuSPARSE/
# cuFFT program and of torch ops with the pruned libraries against the originals, bitwise.
#   on the H200, from the repository root, with target/release/fatpack carried:
#   bash bench/h200/prune/run.sh
set -uo pipefail
root=$PWD
F=$root/target/release/fatpack
here=$root/bench/h200/prune
W=/tmp/prune-bench
rm -rf "$W" && mkdir -p "$W/p90" "$W/site"
CUDA=${CUDA_HOME:-/usr/local/cuda}
SITE=$(python3 -c 'import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))')
echo "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader), $(nproc) CPUs"
echo "fatpack: $($F --version | head -1)"

# shellcheck source=bench/prune_measure.sh
source "$root/bench/prune_measure.sh"

# The toolkit's libraries: three prunes each; the --for 9.0 ones kept for the program.
for base in cublas cublasLt cusparse cufft; do
  real=$(readlink -f "$CUDA/lib64/lib$base.so")
  soname=$(objdump -p "$real" | awk '/SONAME/ {print $2}')
  for mode in "--dead" "--for 8.0,9.0" "--for 9.0"; do
    # shellcheck disable=SC2086
    measure "$soname" "$real" $mode
  done
  mv "$W/last" "$W/p90/$soname"
done

# torch/lib, a copy: every library with device code pruned for 9.0 where it lies.
cp -a "$SITE/torch" "$W/site/torch"
for e in "$SITE"/*; do [ "$(basename "$e")" = torch ] || ln -s "$e" "$W/site/"; done
lib=$W/site/torch/lib
measure libtorch_cuda.so "$lib/libtorch_cuda.so" --dead
measure libtorch_cuda.so "$lib/libtorch_cuda.so" --for 8.0,9.0
before=0; after=0; start=$(date +%s.%N)
for f in "$lib"/*.so*; do
  [ -L "$f" ] && continue
  n=$("$F" inspect --json "$f" 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["totals"]["entries"])' 2>/dev/null || echo 0)
  [ "$n" -gt 0 ] || continue
  measure "$(basename "$f")" "$f" --for 9.0 || continue
  before=$((before + $(stat -c %s "$f"))); after=$((after + $(stat -c %s "$W/last")))
  mv "$W/last" "$f"
done
end=$(date +%s.%N)
echo "torch/lib, libraries with device code: $before -> $after bytes ($(echo "$after $before" | awk '{printf "%.3f", $1/$2}')x), $(echo "$end $start" | awk '{printf "%.1f", $1-$2}') s"
echo "torch/lib du --apparent-size after: $(du -sb --apparent-size "$lib" | cut -f1), du: $(du -sB1 "$lib" | cut -f1)"

echo "== cuBLAS/cuBLASLt/cuSPARSE/cuFFT program, toolkit libraries vs pruned for 9.0"
nvcc -O2 -arch=sm_90 -o "$W/cuda_libs" "$here/cuda_libs.cu" -lcublas -lcublasLt -lcusparse -lcufft || exit 1
LD_LIBRARY_PATH=$CUDA/lib64 "$W/cuda_libs" "$W/orig.bin" > "$W/orig.txt" || { cat "$W/orig.txt"; exit 1; }
LD_LIBRARY_PATH=$W/p90 ldd "$W/cuda_libs" | grep -E 'cublas|cusparse|cufft'
LD_LIBRARY_PATH=$W/p90 "$W/cuda_libs" "$W/p90.bin" > "$W/p90.txt" || { cat "$W/p90.txt"; exit 1; }
paste -d'|' "$W/orig.txt" "$W/p90.txt" | sed 's/|/   | pruned: /'
cmp "$W/orig.bin" "$W/p90.bin" && echo "program results identical ($(stat -c %s "$W/orig.bin") bytes)"

echo "== torch ops, the wheel's torch/lib vs pruned for 9.0"
python3 "$here/torch_ops.py" "$W/t_orig.pt" || exit 1
PYTHONPATH=$W/site python3 "$here/torch_ops.py" "$W/t_p90.pt" || exit 1
python3 "$here/compare.py" "$W/t_orig.pt" "$W/t_p90.pt"
