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

# torch/lib: libtorch_cuda.so alone, then the whole torch package pruned for 9.0 as a folder
# (`fatpack prune --for 9.0 torch -o copy`: every library with device code pruned, the rest
# copied), into a site folder whose other packages link to the originals.
lib=$SITE/torch/lib
measure libtorch_cuda.so "$lib/libtorch_cuda.so" --for 9.0
measure libtorch_cuda.so "$lib/libtorch_cuda.so" --for 8.0,9.0
measure libtorch_cuda.so "$lib/libtorch_cuda.so" --dead
for e in "$SITE"/*; do [ "$(basename "$e")" = torch ] || ln -s "$e" "$W/site/"; done
/usr/bin/time -f "%e s, peak %M KB" -o "$W/time" "$F" prune --for 9.0 "$SITE/torch" -o "$W/site/torch" 2>"$W/log" \
  || { tail -3 "$W/log"; exit 1; }
grep -E '^fatpack prune: lib/' "$W/log" | sed 's/^fatpack prune: /  /'
tail -1 "$W/log"
echo "torch folder prune: $(cat "$W/time")"
plib=$W/site/torch/lib
echo "torch/lib: $(du -sb --apparent-size "$lib" | cut -f1) -> $(du -sb --apparent-size "$plib" | cut -f1) bytes (apparent), du $(du -sB1 "$lib" | cut -f1) -> $(du -sB1 "$plib" | cut -f1)"
for f in "$plib"/*.so*; do
  [ -L "$f" ] && continue
  w=$(comm -13 <(readelf -aW "$lib/$(basename "$f")" 2>&1 >/dev/null | sort -u) <(readelf -aW "$f" 2>&1 >/dev/null | sort -u) | head -c 80)
  [ -z "$w" ] || echo "  readelf warns about $(basename "$f"): $w"
  "$F" inspect "$f" >/dev/null 2>&1 || echo "  inspect fails on $(basename "$f")"
done

echo "== cuBLAS/cuBLASLt/cuSPARSE/cuFFT program, toolkit libraries vs pruned for 9.0"
nvcc -O2 -arch=sm_90 -o "$W/cuda_libs" "$here/cuda_libs.cu" -lcublas -lcublasLt -lcusparse -lcufft || exit 1
LD_LIBRARY_PATH=$CUDA/lib64 "$W/cuda_libs" "$W/orig.bin" > "$W/orig.txt" || { cat "$W/orig.txt"; exit 1; }
LD_LIBRARY_PATH=$W/p90 ldd "$W/cuda_libs" | grep -E 'cublas|cusparse|cufft'
LD_LIBRARY_PATH=$W/p90 "$W/cuda_libs" "$W/p90.bin" > "$W/p90.txt" || { cat "$W/p90.txt"; exit 1; }
paste -d'|' "$W/orig.txt" "$W/p90.txt" | sed 's/|/   | pruned: /'
cmp "$W/orig.bin" "$W/p90.bin" && echo "program results identical ($(stat -c %s "$W/orig.bin") bytes)"

echo "== cuBLASLt, every algorithm its heuristics offer: toolkit and PyPI (torch's nvidia-cublas) libcublasLt vs pruned for 9.0"
nvcc -O2 -arch=sm_90 -o "$W/lt_algos" "$here/cublaslt_algos.cu" -lcublasLt || exit 1
mkdir -p "$W/pypi90"
pypi=$(ls "$SITE"/nvidia/cu13/lib/libcublasLt.so.* 2>/dev/null | head -1)
[ -n "$pypi" ] && measure "PyPI $(basename "$pypi")" "$pypi" --for 9.0 && mv "$W/last" "$W/pypi90/$(basename "$pypi")"
for v in toolkit pypi; do
  case $v in
    toolkit) orig=$CUDA/lib64; pruned=$W/p90 ;;
    pypi) [ -n "$pypi" ] || { echo "no PyPI libcublasLt under $SITE/nvidia"; continue; }; orig=$(dirname "$pypi"); pruned=$W/pypi90 ;;
  esac
  LD_LIBRARY_PATH=$orig:$CUDA/lib64 "$W/lt_algos" "$W/lt_$v.bin" > "$W/lt_$v.txt" || { cat "$W/lt_$v.txt"; exit 1; }
  LD_LIBRARY_PATH=$pruned:$orig:$CUDA/lib64 ldd "$W/lt_algos" | grep cublasLt
  LD_LIBRARY_PATH=$pruned:$orig:$CUDA/lib64 "$W/lt_algos" "$W/lt_${v}90.bin" > "$W/lt_${v}90.txt" || { cat "$W/lt_${v}90.txt"; exit 1; }
  diff "$W/lt_$v.txt" "$W/lt_${v}90.txt" && tail -1 "$W/lt_$v.txt" \
    && cmp "$W/lt_$v.bin" "$W/lt_${v}90.bin" && echo "$v cuBLASLt results identical ($(stat -c %s "$W/lt_$v.bin") bytes)"
done
head -20 "$W/lt_toolkit.txt"

echo "== cuFFT with a load callback, static: libcufft_static.a vs the archive pruned for 9.0"
if [ -f "$CUDA/lib64/libcufft_static.a" ]; then
  mkdir -p "$W/static"
  measure libcufft_static.a "$CUDA/lib64/libcufft_static.a" --for 9.0 && mv "$W/last" "$W/static/libcufft_static.a"
  nvcc -O2 -arch=sm_90 -rdc=true -o "$W/cb_orig" "$here/cufft_callback.cu" -L"$CUDA/lib64" -lcufft_static -lculibos \
    && nvcc -O2 -arch=sm_90 -rdc=true -o "$W/cb_p90" "$here/cufft_callback.cu" -L"$W/static" -L"$CUDA/lib64" -lcufft_static -lculibos \
    && "$W/cb_orig" "$W/cb_orig.bin" && "$W/cb_p90" "$W/cb_p90.bin" \
    && ls -la "$W/cb_orig" "$W/cb_p90" | awk '{print "  " $5, $NF}' \
    && cmp "$W/cb_orig.bin" "$W/cb_p90.bin" && echo "callback results identical"
else
  echo "no libcufft_static.a in $CUDA/lib64"
fi

echo "== torch ops, the wheel's torch/lib vs pruned for 9.0"
python3 "$here/torch_ops.py" "$W/t_orig.pt" || exit 1
PYTHONPATH=$W/site python3 "$here/torch_ops.py" "$W/t_p90.pt" || exit 1
python3 "$here/compare.py" "$W/t_orig.pt" "$W/t_p90.pt"
