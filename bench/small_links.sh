#!/usr/bin/env bash
# Small links through `fatpack ld` against the real linker: N links (default 50) of a program
# with no device code (bench/small/hello.c), through `gcc -B<wrap>` and through plain gcc,
# alternating link by link, in ROUNDS rounds (default 3); prints each round's seconds and
# ratio and the median ratio, and
# checks that every output is the real linker's, byte for byte. Then the same with the
# linker-defaults cache off (FATPACK_CACHE_DIR=), the cost of asking `ld` about itself on
# every link.
#   [FATPACK=path] bash bench/small_links.sh [N] [ROUNDS]   (default: target/release/fatpack)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-50} rounds=${2:-3}
[ -x target/release/fatpack ] || bash scripts/build.sh
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
mkdir -p "$w/wrap" "$w/cache"
ln -s "${FATPACK:-$PWD/target/release/fatpack}" "$w/wrap/ld"
gcc -O2 -c bench/small/hello.c -o "$w/hello.o"
export FATPACK_CACHE_DIR="$w/cache"
# One round: n links each way, alternating link by link (a slow spell of the machine then
# falls on both ways alike); prints "PLAIN_S FATPACK_S". $EPOCHREALTIME: no process per reading.
round() {
    local p=0 f=0 t0 t1
    for _ in $(seq "$n"); do
        t0=$EPOCHREALTIME; gcc -o "$w/out" "$w/hello.o"; t1=$EPOCHREALTIME
        p=$(awk -v s="$p" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", s + b - a }')
        t0=$EPOCHREALTIME; gcc -B"$w/wrap" -o "$w/out" "$w/hello.o"; t1=$EPOCHREALTIME
        f=$(awk -v s="$f" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", s + b - a }')
    done
    echo "$p $f"
}
gcc -o "$w/plain" "$w/hello.o"
gcc -B"$w/wrap" -o "$w/fp" "$w/hello.o"
cmp "$w/plain" "$w/fp" && echo "output: the real linker's, byte for byte ($(stat -c %s "$w/fp") bytes)"
echo "machine: $(nproc) CPUs, $(ld --version | head -1), $(gcc --version | head -1)"
for mode in cached uncached; do
    [ "$mode" = uncached ] && export FATPACK_CACHE_DIR=
    ratios=""
    for r in $(seq "$rounds"); do
        read -r p f <<<"$(round)"
        ratio=$(awk -v a="$f" -v b="$p" 'BEGIN { printf "%.3f", a / b }')
        ratios+="$ratio "
        printf '%-8s round %d: %3d links  plain %6.3f s  fatpack %6.3f s  ratio %s\n' "$mode" "$r" "$n" "$p" "$f" "$ratio"
    done
    echo "$mode: median ratio $(tr ' ' '\n' <<<"$ratios" | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}') of $rounds rounds"
done
