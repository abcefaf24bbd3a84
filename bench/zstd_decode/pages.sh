#!/usr/bin/env bash
# What page faults cost the runtime's first loads: pages.c built with the runtime's zstd
# decoder flags (build.rs), static, so that the binary runs on the GPU machine too.
#   bash bench/zstd_decode/pages.sh OUTDIR RAW...   (each RAW: a solid group's bytes, e.g.
#        the sm_90 cubins of a library `fatpack extract` wrote, concatenated to 8-32 MiB)
# writes OUTDIR/pages, OUTDIR/<name>.zst (zstd -19 with a window over the whole file, as a
# release store's group) and OUTDIR/run.sh, which runs it with 4 KiB and with huge pages.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$1"
shift
mkdir -p "$out"
Z="$(ls -d ~/.cargo/registry/src/*/zstd-sys-*/zstd/lib | tail -1)"
srcs=("$Z"/common/*.c "$Z"/decompress/zstd_decompress.c "$Z"/decompress/zstd_decompress_block.c "$Z"/decompress/zstd_ddict.c "$Z"/decompress/huf_decompress.c)
small="-DHUF_FORCE_DECOMPRESS_X1=1 -DZSTD_FORCE_DECOMPRESS_SEQUENCES_SHORT=1 -DZSTD_STRIP_ERROR_STRINGS=1 -DDYNAMIC_BMI2=0"
# shellcheck disable=SC2086
gcc -Os $small -DZSTD_DISABLE_ASM -I"$Z" -static -o "$out/pages" "$here/pages.c" "${srcs[@]}"
{
    echo 'cd "$(dirname "$0")"; echo "THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled)"'
    for raw in "$@"; do
        name="$(basename "$raw")"
        bits=$(python3 -c "import math,os; print(max(10, math.ceil(math.log2(os.path.getsize('$raw')))))")
        zstd -q -f -19 --long="$bits" -T0 "$raw" -o "$out/$name.zst"
        echo "./pages $name.zst $name 0; ./pages $name.zst $name 1"
    done
} >"$out/run.sh"
bash "$out/run.sh"
