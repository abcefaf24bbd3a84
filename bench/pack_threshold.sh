#!/usr/bin/env bash
# When packing pays: programs of 1..N real nvcc 13.0 objects (one unrolled kernel each,
# `-arch=all`: every target nvcc 13.0 offers, as distributions build), linked by g++ with
# static cudart, plain and through `fatpack ld --fatpack-mode=packed`. Prints, per program,
# the device code in its inputs, both output sizes and link times (median of ROUNDS), and
# what the default (`--fatpack-mode=auto`) does with it. The smallest device code at which
# the packed output is the smaller one sets fatpack's PACK_THRESHOLD (src/link/worth_packing.rs).
#   bash bench/pack_threshold.sh [FATPACK=target/release/fatpack] [ROUNDS=5] [COMPRESS=default|all]
# COMPRESS=all builds the objects with -Xfatbin=-compress-all (nvcc's own compression).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cuda-env.sh
FP="$(realpath "${1:-target/release/fatpack}")"
rounds="${2:-5}"; compress="${3:-default}"
W="$(mktemp -d)"
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/fp"
ln -s "$FP" "$W/fp/ld"
extra=()
[ "$compress" = all ] && extra=(-Xfatbin=-compress-all)
counts=(1 2 3 4 5 6 8 10 12 16)
max=${counts[-1]}
seq 1 "$max" | xargs -P "$(nproc)" -I{} sh -c \
    "python3 bench/gen_kernels.py 1 {} 64 > '$W/k{}.cu' && nvcc -O2 -arch=all ${extra[*]} -c '$W/k{}.cu' -o '$W/k{}.o'"
printf 'int main(void) { return 0; }\n' > "$W/main.c"
gcc -c "$W/main.c" -o "$W/main.o"
libs=(-L"$CUDA_HOME/lib" -lcudart_static -ldl -lrt -lpthread)
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
timed() { local t0 t1; t0=$(date +%s%N); "$@" >/dev/null 2>&1; t1=$(date +%s%N); echo $(( (t1 - t0) / 1000 )); }
echo "nvcc $(nvcc --version | grep -o 'release [0-9.]*'), -arch=all, compress=$compress, g++ $(gcc -dumpversion), $(nproc) CPUs, medians of $rounds"
printf '%7s %9s %9s %9s %7s %8s %9s %7s %7s %7s  %s\n' objects device_B plain_B packed_B size_x plain_ms packed_ms time_x auto_ms auto_x "auto gives"
for n in "${counts[@]}"; do
    objs=("$W/main.o")
    for i in $(seq 1 "$n"); do objs+=("$W/k$i.o"); done
    dev=0
    for h in $(for o in "${objs[@]}"; do readelf -SW "$o" | sed 's/\[ */[/' | awk '$2 == ".nv_fatbin" {print $6}'; done); do
        dev=$((dev + 16#$h))
    done
    tp=(); tk=(); ta=()
    for r in $(seq "$rounds"); do
        tp+=("$(timed g++ -o "$W/plain" "${objs[@]}" "${libs[@]}")")
        tk+=("$(timed g++ -B"$W/fp" -Wl,--fatpack-mode=packed -o "$W/packed" "${objs[@]}" "${libs[@]}")")
        ta+=("$(timed env -u FATPACK_MODE g++ -B"$W/fp" -o "$W/auto" "${objs[@]}" "${libs[@]}")")
    done
    if cmp -s "$W/auto" "$W/plain"; then auto="plain (same bytes)"; elif cmp -s "$W/auto" "$W/packed"; then auto=packed; else auto="?"; fi
    ps=$(stat -c%s "$W/plain"); ks=$(stat -c%s "$W/packed")
    mp=$(printf '%s\n' "${tp[@]}" | median); mk=$(printf '%s\n' "${tk[@]}" | median)
    ma=$(printf '%s\n' "${ta[@]}" | median)
    printf '%7s %9s %9s %9s %7.3f %8.1f %9.1f %7.2f %7.1f %7.2f  %s\n' "$n" "$dev" "$ps" "$ks" \
        "$(echo "$ks / $ps" | bc -l)" "$(echo "$mp / 1000" | bc -l)" "$(echo "$mk / 1000" | bc -l)" \
        "$(echo "$mk / $mp" | bc -l)" "$(echo "$ma / 1000" | bc -l)" "$(echo "$ma / $mp" | bc -l)" "$auto"
done
