#!/usr/bin/env bash
# ON THE GPU MACHINE: the default link's two routes against plain ld, on the two programs of
# issue 24, 5 interleaved rounds each, warm page cache, one fatpack build:
#   plain  - g++/nvcc with the system ld;
#   copy   - fatpack ld --fatpack-route=copy, the inputs with device code copied with stubs;
#   direct - fatpack ld --fatpack-route=direct, the inputs linked as given and the output's
#            containers replaced by stubs afterwards;
# and which of the two the default (--fatpack-route=auto) takes for each program.
# Programs: the static cuBLAS program of tests/gpu/cublas (g++ -B), and bench/h200/five_libs.cu
# on static cuBLAS, cuSOLVER, cuSPARSE, cuFFT (device-linked callback) and cuRAND through
# `nvcc -rdc=true`. Prints wall times, medians and ratios, the direct route's steps, whether
# both routes wrote the same store, sizes, and each binary's checks on the GPU.
#   bash bench/h200/link_routes.sh FATPACK
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
FP="$(realpath "$1")"
CUDA="${CUDA_HOME:-/usr/local/cuda}"
W="$(mktemp -d "${TMPDIR:-/tmp}/fatpack-routes.XXXXXX")"
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/fp" "$W/copy" "$W/direct" "$W/plain"
ln -s "$FP" "$W/fp/ld"
printf '#!/bin/sh\nexec g++ -B"%s" "$@"\n' "$W/fp" >"$W/fp/g++" && chmod +x "$W/fp/g++"
export PATH="$CUDA/bin:$PATH"
echo "$(nproc) CPUs; $(nvcc --version | tail -2 | head -1); $(ld --version | head -1)"
cd "$W"
nvcc -O2 -std=c++17 -c "$root/tests/gpu/cublas/cublas_check.cu" -o check.o || exit 1
nvcc -O2 -std=c++17 -rdc=true -arch=sm_90 -c "$root/bench/h200/five_libs.cu" -o five.o || exit 1
CUBLAS=(-L"$CUDA/lib64" -lcublas_static -lcublasLt_static -lculibos -lcudart_static -lpthread -ldl -lrt)
FIVE=(-L"$CUDA/lib64" -lcusolver_static -lcusolver_lapack_static -lcublas_static -lcublasLt_static
    -lcusparse_static -lcufft_static -lcurand_static -lculibos)
cat "$CUDA"/lib64/lib{cublas,cublasLt,cusolver,cusolver_lapack,cusparse,cufft,curand}_static.a >/dev/null
link() { # PROGRAM WHO: writes WHO/PROGRAM.bin (one name per program: nvcc names its
         # device-link object after the output, and the store records module names)
    local prog=$1 who=$2 out="$2/$1.bin"
    case $prog.$who in
    cublas.plain) g++ -o "$out" check.o "${CUBLAS[@]}" ;;
    cublas.copy) g++ -B"$W/fp" -Wl,--fatpack-verbose -Wl,--fatpack-route=copy -o "$out" check.o "${CUBLAS[@]}" ;;
    cublas.direct) g++ -B"$W/fp" -Wl,--fatpack-verbose -Wl,--fatpack-route=direct -o "$out" check.o "${CUBLAS[@]}" ;;
    five.plain) nvcc -rdc=true -arch=sm_90 -o "$out" five.o "${FIVE[@]}" ;;
    five.copy) nvcc -rdc=true -arch=sm_90 -ccbin "$W/fp/g++" -Xlinker --fatpack-verbose -Xlinker --fatpack-route=copy -o "$out" five.o "${FIVE[@]}" ;;
    five.direct) nvcc -rdc=true -arch=sm_90 -ccbin "$W/fp/g++" -Xlinker --fatpack-verbose -Xlinker --fatpack-route=direct -o "$out" five.o "${FIVE[@]}" ;;
    esac
}
timed() { # NAME PROGRAM WHO
    local t0 t1 rc
    t0=$(date +%s.%N)
    link "$2" "$3" 2>"$1.err"
    rc=$?
    t1=$(date +%s.%N)
    echo "$1 $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') $rc"
}
for prog in cublas five; do
    link "$prog" plain 2>/dev/null # page cache
    for round in 1 2 3 4 5; do
        for who in plain copy direct; do
            timed "$prog.$who.$round" "$prog" "$who"
        done
    done
done >times.txt
python3 - <<'PY'
import statistics
rows = [l.split() for l in open("times.txt")]
by = {}
for name, wall, rc in rows:
    prog, who, rnd = name.split(".")
    by.setdefault(prog, {}).setdefault(who, []).append((float(wall), rc))
for prog, whos in by.items():
    base = statistics.median(w for w, _ in whos["plain"])
    print(f"{prog}: {'link':<6} {'walls (s), 5 rounds':<36} {'median':>7} {'vs plain':>8}")
    for who, v in whos.items():
        walls = [w for w, _ in v]
        med = statistics.median(walls)
        print(f"{prog}: {who:<6} {' '.join(f'{w:.2f}' for w in walls):<36} {med:>7.2f} {med / base:>8.3f}  rc {','.join(sorted(set(r for _, r in v)))}")
PY
# The route the default (--fatpack-route=auto) takes for each program.
g++ -B"$W/fp" -Wl,--fatpack-dry-run -o auto.bin check.o "${CUBLAS[@]}" | grep "^route:" | sed "s/^/cublas auto: /"
nvcc -rdc=true -arch=sm_90 -ccbin "$W/fp/g++" -Xlinker --fatpack-dry-run -o auto.bin five.o "${FIVE[@]}" | grep "^route:" | sed "s/^/five auto: /"
for prog in cublas five; do
    for who in copy direct; do
        grep -h "steps:\|store:\|route:\|packed " "$prog.$who.5.err" | sed "s/^/$prog $who: /"
    done
    d1=$("$FP" inspect --json "copy/$prog.bin" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["packed"]["digest"])')
    d2=$("$FP" inspect --json "direct/$prog.bin" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["packed"]["digest"])')
    [ "$d1" = "$d2" ] && echo "$prog: copy and direct wrote the same store ($d1)" || echo "$prog: STORES DIFFER ($d1 vs $d2)"
done
for who in plain copy direct; do
    out="$(timeout 300 "$who/cublas.bin" 2>&1)"
    echo "cublas $who: rc $? $(echo "$out" | grep -c 'cublas_check: PASS') PASS, $(stat -c %s "$who/cublas.bin") bytes"
    out="$(timeout 300 "$who/five.bin" 2>&1)"
    echo "five $who: rc $? $(echo "$out" | grep -c 'five_libs: PASS') PASS, $(stat -c %s "$who/five.bin") bytes; $(echo "$out" | tail -1)"
done
grep -h "FAIL\|error" ./*.err 2>/dev/null | head -5
