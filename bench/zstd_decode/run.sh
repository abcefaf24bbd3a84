#!/usr/bin/env bash
# zstd decoder builds for the runtime: code size and decode speed of one real cubin, so the
# choice in build.rs (what every packed output carries) rests on numbers.
#   bash bench/zstd_decode/run.sh CUBIN     (e.g. an sm_90 entry `fatpack extract` wrote)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cubin="$1"
Z="$(ls -d ~/.cargo/registry/src/*/zstd-sys-*/zstd/lib | tail -1)"
W="$(mktemp -d)"
trap 'rm -rf "$W"' EXIT
zstd -9 -q -c "$cubin" >"$W/e.zst"
srcs=("$Z"/common/*.c "$Z"/decompress/zstd_decompress.c "$Z"/decompress/zstd_decompress_block.c "$Z"/decompress/zstd_ddict.c "$Z"/decompress/huf_decompress.c)
small="-DHUF_FORCE_DECOMPRESS_X1=1 -DZSTD_FORCE_DECOMPRESS_SEQUENCES_SHORT=1 -DZSTD_STRIP_ERROR_STRINGS=1 -DDYNAMIC_BMI2=0"
echo "$(stat -c %s "$cubin") bytes, zstd -9: $(stat -c %s "$W/e.zst") bytes"
for v in "full:-O2" "thin (zstd-sys feature):-Os $small -DZSTD_NO_INLINE=1" "runtime (build.rs):-Os $small" "runtime at -O2:-O2 $small"; do
    name="${v%%:*}"
    gcc ${v#*:} -DZSTD_DISABLE_ASM -I"$Z" -ffunction-sections -fdata-sections -Wl,--gc-sections \
        -o "$W/b" "$here/bench.c" "${srcs[@]}"
    printf '%-26s text %7s  %s\n' "$name" "$(size "$W/b" | awk 'NR==2{print $1}')" "$("$W/b" "$W/e.zst" x | sed 's/.*= //')"
done
