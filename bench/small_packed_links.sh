#!/usr/bin/env bash
# Small links that pack: N links (default 30) of the fixture program (tests/fixtures/nvcc13
# main.o, kernels.o, other.o: 51 KB of device code, 3 modules) with static cudart, through
# plain g++, through `fatpack ld` as shipped, and with `--fatpack-early-link=yes` (what `auto`
# did before it asked for a large archive: a link started before the scan, then stopped when
# the scan chose the copy route), interleaved in ROUNDS rounds (default 3). Prints each
# round's seconds and the ratios to plain.
# OTHER=/path/to/fatpack adds the same links through another build in the same rounds (a
# before/after).
#   [OTHER=fatpack] bash bench/small_packed_links.sh [N] [ROUNDS]
set -euo pipefail
# Its programs hold less device code than `fatpack ld` packs by default (512 KiB,
# src/link/worth_packing.rs): ask for packing, as for any small program.
export FATPACK_MODE=packed
cd "$(dirname "$0")/.."
n=${1:-30} rounds=${2:-3}
[ -x target/release/fatpack ] || bash scripts/build.sh
source scripts/cuda-env.sh
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
mkdir -p "$w/wrap" "$w/cache"
ln -s "$PWD/target/release/fatpack" "$w/wrap/ld"
if [ -n "${OTHER:-}" ]; then mkdir -p "$w/other" && ln -s "$(realpath "$OTHER")" "$w/other/ld"; fi
export FATPACK_CACHE_DIR="$w/cache"
fx=tests/fixtures/nvcc13
links() { # ARGS...: n links, prints the seconds
  local t0 t1
  t0=$(date +%s.%N)
  for _ in $(seq "$n"); do
    g++ "$@" -o "$w/out" $fx/main.o $fx/kernels.o $fx/other.o -L"$CUDA_HOME/lib" -lcudart_static -ldl -lpthread -lrt
  done
  t1=$(date +%s.%N)
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'
}
echo "machine: $(nproc) CPUs, $(ld --version | head -1), $(gcc --version | head -1)"
links -B"$w/wrap" >/dev/null # the linker-defaults cache filled
for r in $(seq "$rounds"); do
  p=$(links)
  f=$(links -B"$w/wrap")
  e=$(links -B"$w/wrap" -Wl,--fatpack-early-link=yes)
  printf 'round %d: %3d links  plain %6.3f s  fatpack %6.3f s (%.2fx)  early-link=yes %6.3f s (%.2fx)' \
    "$r" "$n" "$p" "$f" "$(awk -v a="$f" -v b="$p" 'BEGIN { print a / b }')" \
    "$e" "$(awk -v a="$e" -v b="$p" 'BEGIN { print a / b }')"
  if [ -n "${OTHER:-}" ]; then
    o=$(links -B"$w/other")
    printf '  other %6.3f s (%.2fx)' "$o" "$(awk -v a="$o" -v b="$p" 'BEGIN { print a / b }')"
  fi
  echo
done
