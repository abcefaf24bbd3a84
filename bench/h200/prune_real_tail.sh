#!/usr/bin/env bash
# ON THE GPU MACHINE: `fatpack prune --keep sm_90,compute_90` of the tail-mode links of issue
# 24's two programs (static cuBLAS; five static libraries through nvcc -rdc): exit code, what
# prune says, sizes, and whether the pruned binaries pass their checks on the GPU.
#   bash bench/h200/prune_real_tail.sh FATPACK
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
FP="$(realpath "$1")"
W="$(mktemp -d "${TMPDIR:-/tmp}/fatpack-prune-tail.XXXXXX")"
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/fp"
ln -s "$FP" "$W/fp/ld"
printf '#!/bin/sh\nexec g++ -B"%s" "$@"\n' "$W/fp" >"$W/fp/g++" && chmod +x "$W/fp/g++"
source "$root/bench/h200/programs.sh"
g++ -B"$W/fp" -Wl,--fatpack-mode=tail -o cublas.tail check.o "${CUBLAS[@]}" || exit 1
nvcc -rdc=true -arch=sm_90 -ccbin "$W/fp/g++" -Xlinker --fatpack-mode=tail -o five.tail five.o "${FIVE[@]}" || exit 1
for prog in cublas five; do
    "$FP" prune --keep sm_90,compute_90 "$prog.tail" -o "$prog.cut" 2>"$prog.prune.err"
    echo "$prog: prune rc $?; $(stat -c %s "$prog.tail") -> $(stat -c %s "$prog.cut" 2>/dev/null || echo none) bytes"
    head -c 1500 "$prog.prune.err" | sed "s/^/$prog: /"
    [ -f "$prog.cut" ] && { out="$(timeout 300 "./$prog.cut" 2>&1)"; echo "$prog pruned: rc $? $(echo "$out" | grep -c 'PASS') PASS lines; $(echo "$out" | tail -1)"; }
done
