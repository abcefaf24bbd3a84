#!/usr/bin/env bash
# The direct route's cut when much follows the device code in the output (a build with -g:
# debug info after the device sections, all of it moved down by the cut). Links the objects
# of examples/over-2gib's generator (TOTAL_MIB of SASS in OBJECTS objects, as
# bench/link_time.sh makes them) plus main.o carrying TAIL_MIB of a non-loaded section,
# through plain gcc and through `fatpack ld --fatpack-route=direct` (and OTHER=/path/to/fatpack,
# another build, in the same rounds), RUNS rounds; prints each link's wall and the cut's
# parts (`--fatpack-verbose`), and checks that both fatpack builds wrote the same bytes.
#   [OTHER=...] [RUNS=3] bash bench/direct_tail.sh WORKDIR [TOTAL_MIB=300] [OBJECTS=100] [TAIL_MIB=500]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$1"; total="${2:-300}"; objects="${3:-100}"; tail_mib="${4:-500}"
source "$root/scripts/cuda-env.sh"
cd "$root"
[ -x target/release/fatpack ] || bash scripts/build.sh
cargo build --release --locked -q --example over-2gib
mkdir -p "$work"
./target/release/examples/over-2gib "$work" "$total" "$objects" \
    tests/fixtures/nvcc13/big_kernels_all.o tests/fixtures/nvcc13/kernels_all.o >/dev/null
cd "$work"
ls obj*.s | xargs -P "$(nproc)" -I{} sh -c '[ -f "$(basename {} .s).o" ] || as -o "$(basename {} .s).o" {}'
gcc -c main.c -o main.o
head -c "$((tail_mib << 20))" /dev/urandom >tail.bin
objcopy --add-section .debug_tail=tail.bin --set-section-flags .debug_tail=noload,readonly main.o main_tail.o
rm -f tail.bin
mkdir -p wrap && ln -sf "$root/target/release/fatpack" wrap/ld
[ -n "${OTHER:-}" ] && mkdir -p wrap-other && ln -sf "$(realpath "$OTHER")" wrap-other/ld
objs="main_tail.o $(ls obj*.o | sort -V | tr '\n' ' ')"
libs="-L$CUDA_HOME/lib -lcudart_static -ldl -lpthread -lrt"
echo "device code: $(du -shc obj*.o | tail -1 | cut -f1) in $objects objects; ${tail_mib} MiB after it in the output"
wall() { local s=$EPOCHREALTIME; "$@"; awk -v a="$s" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; }
for r in $(seq "${RUNS:-3}"); do
    rm -f app_plain app_fp app_other
    p=$(wall gcc -o app_plain $objs $libs)
    f=$(wall gcc -Bwrap -Wl,--fatpack-route=direct -Wl,--fatpack-verbose -o app_fp $objs $libs 2>fp.err)
    line="round $r: plain $p s; fatpack $f s ($(grep -o 'cut [0-9.]*s' fp.err | tail -1))"
    if [ -n "${OTHER:-}" ]; then
        o=$(wall gcc -Bwrap-other -Wl,--fatpack-route=direct -Wl,--fatpack-verbose -o app_other $objs $libs 2>other.err)
        line+="; OTHER $o s ($(grep -o 'cut [0-9.]*s' other.err | tail -1))"
        cmp app_fp app_other
    fi
    echo "$line"
done
grep "route:" fp.err
