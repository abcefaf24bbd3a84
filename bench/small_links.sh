#!/usr/bin/env bash
# Small links through `fatpack ld` against the real linker: N links (default 50) of a program
# with no device code (bench/small/hello.c), through `gcc -B<wrap>` and through plain gcc,
# interleaved in ROUNDS rounds (default 3); prints each round's seconds and the ratio, and
# checks that every output is the real linker's, byte for byte. Then the same with the
# linker-defaults cache off (FATPACK_CACHE_DIR=), the cost of asking `ld` about itself on
# every link.
#   bash bench/small_links.sh [N] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-50} rounds=${2:-3}
[ -x target/release/fatpack ] || bash scripts/build.sh
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
mkdir -p "$w/wrap" "$w/cache"
ln -s "$PWD/target/release/fatpack" "$w/wrap/ld"
gcc -O2 -c bench/small/hello.c -o "$w/hello.o"
export FATPACK_CACHE_DIR="$w/cache"
links() { # WRAP_ARGS...: n links, prints the seconds
  local t0 t1
  t0=$(date +%s.%N)
  for _ in $(seq "$n"); do gcc "$@" -o "$w/out" "$w/hello.o"; done
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'
}
gcc -o "$w/plain" "$w/hello.o"
gcc -B"$w/wrap" -o "$w/fp" "$w/hello.o"
cmp "$w/plain" "$w/fp" && echo "output: the real linker's, byte for byte ($(stat -c %s "$w/fp") bytes)"
echo "machine: $(nproc) CPUs, $(ld --version | head -1), $(gcc --version | head -1)"
for mode in cached uncached; do
  [ "$mode" = uncached ] && export FATPACK_CACHE_DIR=
  for r in $(seq "$rounds"); do
    p=$(links)
    f=$(links -B"$w/wrap")
    printf '%-8s round %d: %3d links  plain %6.3f s  fatpack %6.3f s  ratio %.3f\n' "$mode" "$r" "$n" "$p" "$f" "$(awk -v a="$f" -v b="$p" 'BEGIN { print a / b }')"
  done
done
