#!/usr/bin/env bash
# A link whose archive members carry thousands of sections each (host code built with
# -ffunction-sections, as large C++ libraries are): fatpack's own time and memory per step,
# for one or more fatpack builds side by side (the headers the scan keeps for the rewrite
# grow with the section count).
#   bash bench/many_sections.sh FATPACK [FATPACK...]      (MEMBERS=200 FUNCTIONS=3000)
set -euo pipefail
# Its programs hold less device code than `fatpack ld` packs by default (512 KiB,
# src/link/worth_packing.rs): ask for packing, as for any small program.
export FATPACK_MODE=packed
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/cuda-env.sh"
members="${MEMBERS:-200}"
functions="${FUNCTIONS:-3000}"
W="$(mktemp -d)"
trap 'rm -rf "$W"' EXIT
python3 - "$functions" >"$W/many.cu" <<'PY'
import sys
print('__global__ void k(int *p) { p[threadIdx.x] = threadIdx.x; }')
for i in range(int(sys.argv[1])):
    print(f'int host_function_with_a_rather_long_name_number_{i}(int x) {{ return x * {i} + 1; }}')
print('int launch_many(int *p) { k<<<1, 32>>>(p); return 0; }')
PY
nvcc -O1 -Xcompiler -ffunction-sections -arch=sm_80 -c "$W/many.cu" -o "$W/many.o"
for i in $(seq 1 "$members"); do cp "$W/many.o" "$W/part$i.o"; done
(cd "$W" && ar rcs libmany.a part*.o && rm part*.o)
printf 'int launch_many(int*);\nint main() { return launch_many(0); }\n' >"$W/main.cpp"
g++ -c "$W/main.cpp" -o "$W/main.o"
echo "$members members of $(readelf -SW "$W/many.o" | grep -c '^ *\[') sections, $(stat -c %s "$W/libmany.a") bytes"
n=0
# Peak memory is read from the command's caller (the largest process it waited for): a forked
# link's child and its real linker are not waited for by the command, so links run in one
# process here (FATPACK_FORK=no; a forked link ends sooner by the child's end, milliseconds).
export FATPACK_FORK=no
for fp in "$@"; do
    n=$((n + 1))
    mkdir -p "$W/w$n"
    ln -s "$(realpath "$fp")" "$W/w$n/ld"
    for round in 1 2 3; do
        /usr/bin/time -f "  wall %e s, largest process %M KB" \
            g++ -B"$W/w$n" -o "$W/app" "$W/main.o" "$W/libmany.a" -L"$CUDA_HOME/lib" \
            -lcudart_static -ldl -lpthread -lrt -Wl,--fatpack-verbose 2>&1 |
            grep -E 'steps:|peak RSS|largest' | sed "s/^fatpack: */$n.$round /"
    done
done
