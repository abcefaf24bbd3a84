#!/usr/bin/env bash
# ON THE GPU MACHINE: what compressing NVIDIA's device code again costs the link, beside the
# real linker. The two programs of issue 24 (bench/h200/programs.sh), ROUNDS interleaved
# rounds (default 5), warm page cache:
#   plain   - g++/nvcc with the system ld;
#   direct  - fatpack ld as given (the default);
#   level9  - fatpack ld --fatpack-level=9: every entry compressed at level 9, NVIDIA's frames
#             included (the compression a store that keeps the smaller of the two frames does).
# Prints walls, medians, ratios, and each fatpack link's steps and store.
#   [ROUNDS=5] bash bench/h200/level_probe.sh FATPACK
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
FP="$(realpath "$1")"
W="$(mktemp -d "${TMPDIR:-/tmp}/fatpack-level.XXXXXX")"
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/fp"
ln -s "$FP" "$W/fp/ld"
printf '#!/bin/sh\nexec g++ -B"%s" "$@"\n' "$W/fp" >"$W/fp/g++" && chmod +x "$W/fp/g++"
source "$root/bench/h200/programs.sh"
link() {
    local prog=$1 who=$2 out="$2.$1.bin" x=()
    case $who in level9) x=(--fatpack-level=9) ;; esac
    local gx=() nx=()
    for a in --fatpack-verbose "${x[@]}"; do gx+=("-Wl,$a"); nx+=(-Xlinker "$a"); done
    case $prog.$who in
    cublas.plain) g++ -o "$out" check.o "${CUBLAS[@]}" ;;
    cublas.*) g++ -B"$W/fp" "${gx[@]}" -o "$out" check.o "${CUBLAS[@]}" ;;
    five.plain) nvcc -rdc=true -arch=sm_90 -o "$out" five.o "${FIVE[@]}" ;;
    five.*) nvcc -rdc=true -arch=sm_90 -ccbin "$W/fp/g++" "${nx[@]}" -o "$out" five.o "${FIVE[@]}" ;;
    esac
}
rounds "${ROUNDS:-5}" plain direct level9
for prog in cublas five; do
    for who in direct level9; do
        grep -h "packed \|steps:\|store:" "$prog.$who.${ROUNDS:-5}.err" | sed "s/^/$prog $who: /"
        echo "$prog $who: $(stat -c %s "$who.$prog.bin") bytes"
    done
done
