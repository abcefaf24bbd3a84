#!/usr/bin/env bash
# The runtime's share of a first launch, without a GPU: tests/gpu's first_kernel (the heavy
# module of the first-launch row, 431 KB of sm_90 SASS) linked packed against the fake
# cudart and libcuda of tests/fake, run RUNS times with FATPACK_LOG=info; prints the medians
# of the runtime's own split (set-up, decode and check, cudart) and the page faults and CPU
# time of a packed run against a plain one (perf stat, where perf is installed). The fake
# driver takes the container without loading it, so this is the runtime's part only; the
# driver's part is measured on the GPU machine (bench/h200/first_launch_probe.sh).
#   bash bench/first_launch_local.sh [FATPACK=target/release/fatpack] [RUNS=21]
# Needs the objects tests/gpu/build.sh compiles (tests/gpu/build/bobj/std; it builds them).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cuda-env.sh
FP="$(realpath "${1:-target/release/fatpack}")"
runs="${2:-21}"
b=tests/gpu/build/bobj/std
[ -f "$b/first_kernel.o" ] || { echo "first_launch_local: no $b/first_kernel.o: run bash tests/gpu/build.sh first" >&2; exit 1; }
W="$(mktemp -d)"
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/fp" "$W/cuda"
ln -s "$FP" "$W/fp/ld"
cc -shared -fPIC -O1 -pthread -o "$W/libfakecudart.so" tests/fake/fakecudart.c
cc -shared -fPIC -O1 -Wl,-soname,libcuda.so.1 -o "$W/cuda/libcuda.so.1" tests/fake/fakecuda.c
# What first_kernel calls that the fake cudart leaves out: host memory stands in.
cat > "$W/shim.c" <<'EOF'
#include <stdlib.h>
#include <string.h>
int cudaMalloc(void **p, size_t n) { *p = malloc(n); return 0; }
int cudaMemcpy(void *d, const void *s, size_t n, int k) { (void)k; memcpy(d, s, n); return 0; }
int cudaMemset(void *d, int v, size_t n) { memset(d, v, n); return 0; }
int cudaMemGetInfo(size_t *f, size_t *t) { *f = 1; *t = 2; return 0; }
int cudaDeviceSynchronize(void) { return 0; }
int cudaGetLastError(void) { return 0; }
const char *cudaGetErrorName(int e) { (void)e; return "fake"; }
const char *cudaGetErrorString(int e) { (void)e; return "fake"; }
EOF
cc -c -O1 -fPIC "$W/shim.c" -o "$W/shim.o"
link() { g++ "$@" "$b/first_kernel.o" "$b"/heavy_0*.o "$W/shim.o" -L"$W" -lfakecudart -Wl,-rpath,"$W"; }
link -o "$W/plain"
link -B"$W/fp" -Wl,--fatpack-mode=packed -o "$W/packed"
export FAKE_CUDA_DEVICES=90 LD_LIBRARY_PATH="$W/cuda"
for i in $(seq "$runs"); do
    FATPACK_LOG=info "$W/packed" 2>&1 >/dev/null | grep -m1 'registered' || true
done > "$W/log"
python3 - "$W/log" "$runs" <<'PY'
import re, statistics, sys
rows = [l for l in open(sys.argv[1]) if "registered" in l]
if len(rows) != int(sys.argv[2]):
    sys.exit(f"first_launch_local: {len(rows)} of {sys.argv[2]} runs logged a registration")
med = lambda pat: statistics.median(float(re.search(pat, l).group(1)) for l in rows)
print(rows[0].split(": registered")[0].replace("fatpack: ", ""), "-", re.search(r"\((\d+) bytes", rows[0]).group(1), "bytes decoded")
print(f"runtime, medians of {len(rows)} (ms): total {med(r' in ([0-9.]+) ms'):.2f}, set-up {med(r'set-up ([0-9.]+)'):.2f}, "
      f"decode and check {med(r'decode and check ([0-9.]+)'):.2f}, cudart {med(r'cudart ([0-9.]+)'):.2f}")
PY
if command -v perf >/dev/null; then
    for v in plain packed; do
        printf '%-7s ' "$v"
        { perf stat -r "$runs" -e page-faults,task-clock "$W/$v" 2>&1 >/dev/null || true; } \
            | awk '/page-faults/ {f=$1} /task-clock/ {t=$1} END {print "page faults " f ", CPU " t " ms"}'
    done
fi
