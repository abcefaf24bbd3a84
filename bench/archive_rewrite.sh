#!/usr/bin/env bash
# The rewrite of a large static archive: plain ld against fatpack ld (OLD and NEW builds
# when given), 3 interleaved rounds, on one archive of 16 members, each an object of
# examples/over-2gib's generator (device code) plus 25 MB of host data: the case of static
# CUDA libraries, whose members carry host code beside their fatbins. Prints each link's
# wall time and, for fatpack, its rewrite step's time and the peak RSS after it.
#   [DEVICE_MIB=800] bash bench/archive_rewrite.sh WORKDIR [FATPACK...]
#                                               (default target/release/fatpack)
# DEVICE_MIB sets the device code of the 16 members (the host data stays 16 x 25 MB): 800
# makes it mostly device code (the copy route's case), 200 mostly host code (the direct
# route's, as in static CUDA libraries). Each fatpack link's route is printed.
set -euo pipefail
# Its programs hold less device code than `fatpack ld` packs by default (512 KiB,
# src/link/worth_packing.rs): ask for packing, as for any small program.
export FATPACK_MODE=packed
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$1"; shift
fps=("$@"); [ ${#fps[@]} -gt 0 ] || fps=("$root/target/release/fatpack")
for i in "${!fps[@]}"; do fps[$i]="$(realpath "${fps[$i]}")"; done
source "$root/scripts/cuda-env.sh"
cd "$root" && cargo build --release --locked -q --example over-2gib
mkdir -p "$work" && cd "$work"
if [ ! -f libh.a ]; then
    "$root/target/release/examples/over-2gib" "$work" "${DEVICE_MIB:-800}" 16 \
        "$root/tests/fixtures/nvcc13/big_kernels_all.o" "$root/tests/fixtures/nvcc13/kernels_all.o" >/dev/null
    ls obj*.s | xargs -P "$(nproc)" -I{} sh -c 'as -o "$(basename {} .s).o" {}'
    gcc -c main.c -o main.o
    head -c 25000000 /dev/urandom > host.bin
    for i in $(seq 0 15); do
        objcopy --add-section .hostdata=host.bin --set-section-flags .hostdata=alloc,load,data,contents "obj$i.o" "h$i.o"
    done
    ar rcs libh.a $(ls h*.o | sort -V)
    rm -f obj*.s host.bin
fi
echo "archive: $(stat -c %s libh.a) bytes; $(nproc) CPUs"
libs=(-L"$CUDA_HOME/lib" -lcudart_static -ldl -lpthread -lrt)
for i in "${!fps[@]}"; do mkdir -p "w$i" && ln -sf "${fps[$i]}" "w$i/ld"; done
for round in 1 2 3; do
    rm -f app; sync
    s=$(date +%s.%N); g++ -o app main.o -Wl,--whole-archive libh.a -Wl,--no-whole-archive "${libs[@]}"; e=$(date +%s.%N)
    printf "round %d plain ld: %.2f s\n" "$round" "$(echo "$e - $s" | bc)"
    for i in "${!fps[@]}"; do
        rm -f app; sync
        s=$(date +%s.%N)
        g++ -B"w$i" -Wl,--fatpack-verbose -Wl,--fatpack-level=1 -o app main.o -Wl,--whole-archive libh.a \
            -Wl,--no-whole-archive "${libs[@]}" 2> verbose.txt
        e=$(date +%s.%N)
        printf "round %d fatpack %s: %.2f s; %s; peak RSS after the rewrite %s MiB; route %s\n" "$round" "${fps[$i]}" \
            "$(echo "$e - $s" | bc)" "$(grep -o 'rewrite inputs [0-9.]*s' verbose.txt)" \
            "$(grep -o 'after each step: [^;]*' verbose.txt | grep -o 'rewrite inputs [0-9]*' | grep -o '[0-9]*$')" \
            "$(grep -o 'route: [a-z]*' verbose.txt | cut -d' ' -f2)"
    done
done
