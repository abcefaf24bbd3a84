#!/usr/bin/env bash
# ON THE GPU MACHINE: the default link against plain ld on the two programs issue 24 names,
# two fatpack builds side by side, 5 interleaved rounds each, warm page cache:
#   - the static cuBLAS program of tests/gpu/cublas (g++ -B),
#   - bench/h200/five_libs.cu on static cuBLAS, cuSOLVER, cuSPARSE, cuFFT (with a device-linked
#     load callback) and cuRAND, built with `nvcc -rdc=true` and linked through nvcc.
# Prints each link's wall times, medians and ratios to plain, NEW's --fatpack-verbose steps,
# whether OLD's and NEW's outputs are byte-identical given one runtime archive, and each
# binary's checks on the GPU.
#   bash bench/h200/link_overlap.sh OLD_FATPACK NEW_FATPACK
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OLD="$(realpath "$1")"
NEW="$(realpath "$2")"
W="$(mktemp -d "${TMPDIR:-/tmp}/fatpack-overlap.XXXXXX")"
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/old" "$W/new"
ln -s "$OLD" "$W/old/ld"
ln -s "$NEW" "$W/new/ld"
# nvcc's host compiler for the packed links: g++ finding fatpack as its ld.
for who in old new; do
    printf '#!/bin/sh\nexec g++ -B"%s" "$@"\n' "$W/$who" >"$W/$who/g++" && chmod +x "$W/$who/g++"
done
cd "$W"
source "$root/bench/h200/programs.sh"
link() { # PROGRAM WHO OUT
    local prog=$1 who=$2 out=$3
    case $prog.$who in
    cublas.plain) g++ -o "$out" check.o "${CUBLAS[@]}" ;;
    cublas.*) g++ -B"$W/$who" -Wl,--fatpack-verbose -o "$out" check.o "${CUBLAS[@]}" ;;
    five.plain) nvcc -rdc=true -arch=sm_90 -o "$out" five.o "${FIVE[@]}" ;;
    five.*) nvcc -rdc=true -arch=sm_90 -ccbin "$W/$who/g++" -Xlinker --fatpack-verbose -o "$out" five.o "${FIVE[@]}" ;;
    esac
}
for prog in cublas five; do
    link "$prog" plain "$prog.warm" 2>/dev/null # page cache
    for round in 1 2 3 4 5; do
        for who in plain old new; do
            timed "$prog.$who.$round" "$prog" "$who"
        done
    done
done >times.txt
medians times.txt
for prog in cublas five; do
    for who in old new; do
        grep -h "steps:\|store:\|rewrite:" "$prog.$who.5.err" | sed "s/^/$prog $who: /"
    done
done
rt="$W/rt.a"
mkdir -p keep && g++ -B"$W/new" -Wl,--fatpack-save-temps -o keep/new.bin check.o "${CUBLAS[@]}" 2>/dev/null &&
    cp keep/new.bin.fatpack-temps/libfatpack_rt.a "$rt" &&
    mkdir -p old_rt new_rt &&
    for prog in cublas five; do
        # One output name for both: nvcc names its device-link object after the output, and
        # the store records module names.
        FATPACK_RUNTIME="$rt" link "$prog" old "old_rt/$prog.bin" 2>/dev/null &&
            FATPACK_RUNTIME="$rt" link "$prog" new "new_rt/$prog.bin" 2>/dev/null &&
            { cmp -s "old_rt/$prog.bin" "new_rt/$prog.bin" && echo "$prog: OLD and NEW with one runtime archive: byte-identical ($(stat -c %s "new_rt/$prog.bin") bytes)" ||
                echo "$prog: OLD and NEW with one runtime archive: DIFFER"; }
    done
for who in plain old new; do
    out="$(timeout 300 "./cublas.$who.bin" 2>&1)"
    echo "cublas $who: rc $? $(echo "$out" | grep -c 'cublas_check: PASS') PASS, $(stat -c %s "cublas.$who.bin") bytes"
    out="$(timeout 300 "./five.$who.bin" 2>&1)"
    echo "five $who: rc $? $(echo "$out" | grep -c 'five_libs: PASS') PASS, $(stat -c %s "five.$who.bin") bytes; $(echo "$out" | tail -1)"
done
grep -h "FAIL" ./*.err 2>/dev/null | head -5
