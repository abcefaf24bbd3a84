#!/usr/bin/env bash
# ON THE GPU MACHINE: where the packed link of static cuBLAS (the program of
# tests/gpu/cublas) reaches its peak memory: plain and packed link, fatpack's verbose report
# with its peak RSS after each step and the real linker's own peak.
#   bash bench/h200/cublas_link_memory.sh [FATPACK]
set -eu
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
FP="$(realpath "${1:-target/release/fatpack}")"
CUDA="${CUDA_HOME:-/usr/local/cuda}"
W="$(mktemp -d "${TMPDIR:-/tmp}/fatpack-cublas-mem.XXXXXX")"
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/fp" && ln -s "$FP" "$W/fp/ld"
export PATH="$CUDA/bin:$PATH"
nvcc -O2 -std=c++17 -c "$root/tests/gpu/cublas/cublas_check.cu" -o "$W/check.o"
LIBS=(-L"$CUDA/lib64" -lcublas_static -lcublasLt_static -lculibos -lcudart_static -lpthread -ldl -lrt)
# Peak memory is read from the command's caller (the largest process it waited for): a forked
# link's child and its real linker are not waited for by the command, so links run in one
# process here (FATPACK_FORK=no; a forked link ends sooner by the child's end, milliseconds).
export FATPACK_FORK=no
# timed NAME CMD...: wall seconds and the peak RSS of the largest process CMD ran.
timed() {
    python3 - "$@" <<'PY'
import resource, subprocess, sys, time
t = time.time()
r = subprocess.run(sys.argv[2:])
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(f"{sys.argv[1]}: {time.time() - t:.2f} s, peak {peak:.0f} MiB, rc {r.returncode}")
sys.exit(r.returncode)
PY
}
# Round 1 reads the archives from disk on a fresh machine; compare within round 2 and 3.
for i in 1 2 3; do
    timed "plain link" g++ -o "$W/plain" "$W/check.o" "${LIBS[@]}"
    timed "packed link" g++ -B"$W/fp" -Wl,--fatpack-verbose -o "$W/packed" "$W/check.o" "${LIBS[@]}" 2>&1 | grep -v "rewrote"
done
ls -l "$W/plain" "$W/packed" | awk '{print $5, $9}'
