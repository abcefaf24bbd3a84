#!/usr/bin/env bash
# Would independent frames per stretch of an entry (decodable on several threads at first
# launch) cost store size? For every cubin in DIR: zstd -9 (window 2^24, as the store's
# levels 1-12) of the whole cubin, against the same level over independent 128 KiB and
# 256 KiB pieces of it. Prints the sums and the ratios to whole frames.
#   bash bench/chunked_frames.sh DIR      (e.g. the sm_90 cubins `fatpack extract --arch sm_90` writes)
set -euo pipefail
dir="$1"
t="$(mktemp -d)"
trap 'rm -rf "$t"' EXIT
raw=0; whole=0; c128=0; c256=0; n=0
for f in "$dir"/*; do
    n=$((n + 1)); raw=$((raw + $(stat -c%s "$f")))
    whole=$((whole + $(zstd -q -9 --long=24 -c "$f" | wc -c)))
    for k in 128 256; do
        rm -rf "$t/ch" && mkdir "$t/ch" && split -b "${k}K" "$f" "$t/ch/c."
        s=0
        for c in "$t"/ch/c.*; do s=$((s + $(zstd -q -9 -c "$c" | wc -c))); done
        if [ "$k" = 128 ]; then c128=$((c128 + s)); else c256=$((c256 + s)); fi
    done
done
echo "$dir: $n cubins, $raw bytes raw; whole frames $whole; 128 KiB pieces $c128 ($(echo "scale=3; $c128 / $whole" | bc)x); 256 KiB pieces $c256 ($(echo "scale=3; $c256 / $whole" | bc)x)"
