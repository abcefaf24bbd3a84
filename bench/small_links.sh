#!/usr/bin/env bash
# Small links through `fatpack ld` against the real linker: N links (default 50) of a program
# with no device code (bench/small/hello.c), through `gcc -B<wrap>` and through plain gcc,
# alternating link by link, in ROUNDS rounds (default 3); prints each round's seconds and
# ratio and the median ratio, and
# checks that every output is the real linker's, byte for byte. Beside them, the floor of any
# wrapper: a C program as `ld` that only execs the real linker (one more process, nothing
# else), timed the same way. Then the same with the linker-defaults cache off
# (FATPACK_CACHE_DIR=), the cost of asking `ld` about itself on every link.
#   [FATPACK=path] bash bench/small_links.sh [N] [ROUNDS]   (default: target/release/fatpack)
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-50} rounds=${2:-3}
[ -x target/release/fatpack ] || bash scripts/build.sh
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
mkdir -p "$w/wrap" "$w/cache" "$w/floor"
ln -s "${FATPACK:-$PWD/target/release/fatpack}" "$w/wrap/ld"
printf '#include <unistd.h>\nint main(int c, char **v) { (void)c; v[0] = "%s"; execv(v[0], v); return 127; }\n' \
    "$(command -v ld)" >"$w/floor.c"
gcc -O2 -o "$w/floor/ld" "$w/floor.c"
gcc -O2 -c bench/small/hello.c -o "$w/hello.o"
export FATPACK_CACHE_DIR="$w/cache"
# One round: n links each way, alternating link by link (a slow spell of the machine then
# falls on all alike); prints "PLAIN_S FATPACK_S FLOOR_S". $EPOCHREALTIME: no process per
# reading.
round() {
    local p=0 f=0 e=0 t0 t1
    for _ in $(seq "$n"); do
        t0=$EPOCHREALTIME; gcc -o "$w/out" "$w/hello.o"; t1=$EPOCHREALTIME
        p=$(awk -v s="$p" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", s + b - a }')
        t0=$EPOCHREALTIME; gcc -B"$w/wrap" -o "$w/out" "$w/hello.o"; t1=$EPOCHREALTIME
        f=$(awk -v s="$f" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", s + b - a }')
        t0=$EPOCHREALTIME; gcc -B"$w/floor" -o "$w/out" "$w/hello.o"; t1=$EPOCHREALTIME
        e=$(awk -v s="$e" -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", s + b - a }')
    done
    echo "$p $f $e"
}
gcc -o "$w/plain" "$w/hello.o"
gcc -B"$w/wrap" -o "$w/fp" "$w/hello.o"
cmp "$w/plain" "$w/fp" && echo "output: the real linker's, byte for byte ($(stat -c %s "$w/fp") bytes)"
echo "machine: $(nproc) CPUs, $(ld --version | head -1), $(gcc --version | head -1)"
for mode in cached uncached; do
    [ "$mode" = uncached ] && export FATPACK_CACHE_DIR=
    ratios="" floors=""
    for r in $(seq "$rounds"); do
        read -r p f e <<<"$(round)"
        ratio=$(awk -v a="$f" -v b="$p" 'BEGIN { printf "%.3f", a / b }')
        floor=$(awk -v a="$e" -v b="$p" 'BEGIN { printf "%.3f", a / b }')
        ratios+="$ratio " floors+="$floor "
        printf '%-8s round %d: %3d links  plain %6.3f s  fatpack %6.3f s  ratio %s  (exec-only wrapper %6.3f s, %s)\n' \
            "$mode" "$r" "$n" "$p" "$f" "$ratio" "$e" "$floor"
    done
    median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
    echo "$mode: median ratio $(median "$ratios") of $rounds rounds (exec-only wrapper: $(median "$floors"))"
done
