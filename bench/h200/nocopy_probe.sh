#!/usr/bin/env bash
# ON THE GPU MACHINE: what a link that copies no input would cost, before building it: plain
# ld, tail mode (the same inputs with the device code placed last by fatpack's script), the
# default packed link, and `fatpack prune` cutting the tail output down to sm_90 (the same
# kind of work as replacing every container by a stub in the output and truncating it).
#   bash bench/h200/nocopy_probe.sh FATPACK
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
FP="$(realpath "$1")"
CUDA="${CUDA_HOME:-/usr/local/cuda}"
W="$(mktemp -d "${TMPDIR:-/tmp}/fatpack-probe.XXXXXX")"
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/fp"
ln -s "$FP" "$W/fp/ld"
printf '#!/bin/sh\nexec g++ -B"%s" "$@"\n' "$W/fp" >"$W/fp/g++" && chmod +x "$W/fp/g++"
export PATH="$CUDA/bin:$PATH"
echo "$(nproc) CPUs"
cd "$W"
nvcc -O2 -std=c++17 -c "$root/tests/gpu/cublas/cublas_check.cu" -o check.o || exit 1
nvcc -O2 -std=c++17 -rdc=true -arch=sm_90 -c "$root/bench/h200/five_libs.cu" -o five.o || exit 1
CUBLAS=(-L"$CUDA/lib64" -lcublas_static -lcublasLt_static -lculibos -lcudart_static -lpthread -ldl -lrt)
FIVE=(-L"$CUDA/lib64" -lcusolver_static -lcusolver_lapack_static -lcublas_static -lcublasLt_static
    -lcusparse_static -lcufft_static -lcurand_static -lculibos)
cat "$CUDA"/lib64/lib{cublas,cublasLt,cusolver,cusolver_lapack,cusparse,cufft,curand}_static.a >/dev/null
link() { # PROGRAM WHO OUT
    local prog=$1 who=$2 out=$3
    case $prog.$who in
    cublas.plain) g++ -o "$out" check.o "${CUBLAS[@]}" ;;
    cublas.tail) g++ -B"$W/fp" -Wl,--fatpack-mode=tail -o "$out" check.o "${CUBLAS[@]}" ;;
    cublas.packed) g++ -B"$W/fp" -o "$out" check.o "${CUBLAS[@]}" ;;
    five.plain) nvcc -rdc=true -arch=sm_90 -o "$out" five.o "${FIVE[@]}" ;;
    five.tail) nvcc -rdc=true -arch=sm_90 -ccbin "$W/fp/g++" -Xlinker --fatpack-mode=tail -o "$out" five.o "${FIVE[@]}" ;;
    five.packed) nvcc -rdc=true -arch=sm_90 -ccbin "$W/fp/g++" -o "$out" five.o "${FIVE[@]}" ;;
    esac
}
sec() { local t0 t1; t0=$(date +%s.%N); "$@"; local rc=$?; t1=$(date +%s.%N); awk -v a="$t0" -v b="$t1" -v r=$rc 'BEGIN { printf "%.2f%s", b - a, (r ? "!" : "") }'; }
for prog in cublas five; do
    link "$prog" plain "$prog.warm" 2>/dev/null
    for round in 1 2 3; do
        line="$prog round $round:"
        for who in plain tail packed; do
            line="$line $who $(sec link "$prog" "$who" "$prog.$who.bin" 2>/dev/null)"
        done
        line="$line prune-cut $(sec "$FP" prune --keep sm_90,compute_90 "$prog.tail.bin" -o "$prog.cut.bin" 2>/dev/null)"
        echo "$line"
    done
    ls -l "$prog".*.bin | awk '{print "  " $5, $NF}'
    "$FP" inspect "$prog.tail.bin" 2>/dev/null | head -5
done
