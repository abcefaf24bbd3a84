#!/usr/bin/env bash
# Every kind of output fatpack writes, from the committed fixtures, into OUTDIR, and one
# line per file (blake3-free: sha256sum) in OUTDIR/SUMS: links through every linker (mapped
# store, side file, shared library, archives, tail mode, another level), then prune, split,
# join, repack and extract of what they made. A refactoring that must not change a byte is
# checked by running this with the old and the new binary and comparing the two SUMS:
#   bash scripts/outputs.sh OLD_FATPACK /tmp/a && bash scripts/outputs.sh NEW_FATPACK /tmp/b
#   diff /tmp/a/SUMS /tmp/b/SUMS
# Packed links carry the runtime: where the two binaries embed different runtimes, give both
# the same one (FATPACK_RUNTIME=path/to/libfatpack_rt.a) to compare what the CLI writes.
# (tests/it/golden.rs checks the linker-independent part of it on every test run.)
set -euo pipefail
# Its programs hold less device code than `fatpack ld` packs by default (512 KiB,
# src/link/worth_packing.rs): ask for packing, as for any small program.
export FATPACK_MODE=packed
fatpack="$(realpath "$1")"
out="$2"
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/cuda-env.sh"
fx="$root/tests/fixtures/nvcc13"
rm -rf "$out"
mkdir -p "$out/wrap"
for n in ld ld.bfd ld.gold ld.lld ld.mold; do ln -s "$fatpack" "$out/wrap/$n"; done
cd "$out"
cp "$fx"/*.o "$fx"/*.a "$fx"/libfixture.so "$fx"/fixture_exe .
cp "$fx"/libfixture_thin.a .
# The thin archive names its members relative to itself: they are copied beside it.
link() { # NAME EXTRA... : g++ link of the fixture program through fatpack
    local name="$1"
    shift
    g++ -Bwrap -o "$name" "$@" -L"$CUDA_HOME/lib" -lcudart_static -ldl -lpthread -lrt
}
link exe main.o kernels.o other.o
link exe_side main.o kernels.o other.o -Wl,--fatpack-side-file
link exe_level3 main.o kernels.o other.o -Wl,--fatpack-level=3
link exe_ar main.o libfixture.a
link exe_thin main.o libfixture_thin.a
link exe_tail main.o kernels.o other.o -Wl,--fatpack-mode=tail
for v in none all size lz4 af; do link "exe_$v" main.o "kernels_$v.o" other.o; done
for ldn in gold lld mold; do
    command -v "ld.$ldn" >/dev/null || command -v "$ldn" >/dev/null || continue
    link "exe_$ldn" -fuse-ld="$ldn" main.o kernels.o other.o
done
g++ -Bwrap -shared -o libpacked.so kernels.o other.o -L"$CUDA_HOME/lib" -lcudart_static
# Writers over what the links made.
"$fatpack" prune --for 8.0 exe -o exe.pruned80
"$fatpack" prune --keep sm_80,sm_90 exe -o exe.keep8090
"$fatpack" prune --for 9.0 exe_side -o exe_side.pruned90
"$fatpack" prune --for 9.0 exe_tail -o exe_tail.pruned90
"$fatpack" prune --for 9.0 fixture_exe -o fixture_exe.pruned90
"$fatpack" prune --for 8.6 libfixture.so -o libfixture.pruned86.so
"$fatpack" prune --for 8.6 kernels.o -o kernels.pruned86.o
"$fatpack" prune --for 8.6 libfixture.a -o libfixture.pruned86.a
"$fatpack" prune --for 8.6 libpacked.so -o libpacked.pruned86.so
"$fatpack" repack --level 5 exe -o exe.repack5
"$fatpack" repack --level 5 exe_side -o exe_side.repack5
mkdir split
"$fatpack" split exe --into split
"$fatpack" join split/exe -o exe.joined
mkdir extract
"$fatpack" extract exe -o extract/exe >/dev/null
"$fatpack" extract kernels.o -o extract/kernels >/dev/null
"$fatpack" inspect --json exe exe_side exe_tail libpacked.so kernels.o libfixture.a >inspect.json
rm -rf wrap
find . -type f ! -name SUMS -print0 | sort -z | xargs -0 sha256sum >SUMS
wc -l <SUMS
