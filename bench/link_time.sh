#!/usr/bin/env bash
# Link time, peak RSS and output size: plain ld vs fatpack ld (packed, packed+side file,
# tail mode), on the same generated objects (examples/over-2gib's generator).
#   bash bench/link_time.sh TOTAL_MIB OBJECTS WORKDIR
# Below 2 GiB plain ld links too, so the ratio is measured directly.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
total="$1"; objects="$2"; work="$3"
source "$root/scripts/cuda-env.sh"
cd "$root"
bash scripts/build.sh
cargo build --release --locked -q --example over-2gib
mkdir -p "$work"
./target/release/examples/over-2gib "$work" "$total" "$objects" tests/fixtures/nvcc13/big_kernels_all.o tests/fixtures/nvcc13/kernels_all.o >/dev/null
cd "$work"
ls obj*.s | xargs -P "$(nproc)" -I{} sh -c 'as -o "$(basename {} .s).o" {}'
gcc -c main.c -o main.o
mkdir -p wrap && ln -sf "$root/target/release/fatpack" wrap/ld
objs="main.o $(ls obj*.o | sort -V | tr '\n' ' ')"
libs="-L$CUDA_HOME/lib -lcudart_static -ldl -lpthread -lrt"
sync
row() { # label, output, command...
    local label=$1 out=$2; shift 2
    rm -f "$out" "$out.fatpack"; sync
    local s=$(date +%s.%N)
    if /usr/bin/time -o time.txt -f "%M" "$@" >/dev/null 2>err.txt; then
        local e=$(date +%s.%N)
        local size=$(stat -c %s "$out"); [ -f "$out.fatpack" ] && size="$size + $(stat -c %s "$out.fatpack")"
        printf "| %s | %.2f | %d | %s |\n" "$label" "$(echo "$e - $s" | bc)" "$(( $(cat time.txt) / 1024 ))" "$size"
    else
        printf "| %s | failed: %s | | |\n" "$label" "$(grep -m1 -o 'relocation truncated to fit: [A-Z0-9_]*' err.txt || head -c 80 err.txt)"
    fi
}
echo "device code: $(du -shc obj*.o | tail -1 | cut -f1) in $objects objects"
echo "| link | wall s | peak RSS MiB | output bytes |"
echo "|---|---:|---:|---:|"
row "plain ld" app_plain gcc -o app_plain $objs $libs
row "fatpack ld (packed)" app_packed gcc -Bwrap -o app_packed $objs $libs
row "fatpack ld --fatpack-side-file" app_side gcc -Bwrap -Wl,--fatpack-side-file -o app_side $objs $libs
row "fatpack ld --fatpack-mode=tail" app_tail gcc -Bwrap -Wl,--fatpack-mode=tail -o app_tail $objs $libs
