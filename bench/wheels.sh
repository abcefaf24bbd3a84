#!/usr/bin/env bash
# Store sizes on NVIDIA's own device code, from the PyPI wheels nvidia-cublas
# (libcublasLt.so) and nvidia-cusparse (libcusparse.so), each library on its own:
#
#   bash bench/wheels.sh [WORK=/tmp/fatpack-wheels] [LEVELS=3,9,19]     (LINK=0: no link runs)
#
# Installs the wheels (--no-deps) into a venv under WORK, then for each library runs
# `cargo bench --bench store_sizes` (the same entries as the library holds them, repacked
# uncompressed, by nvcc's fatbinary in its default and size modes, and cubin-store's writer at
# LEVELS, one frame per entry; what `fatpack ld` and `repack` write is bench/store_shipped.sh)
# and `xz -9e` over the entries that
# `fatpack extract` writes (the reference limit), then bench/link_time.sh on objects
# carrying each library's cubins (plain ld vs fatpack ld: wall, peak RSS, size). Slow on few
# cores: nvcc's size mode writes about 3 MB/s, xz -9e about 2 MB/s per thread.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-/tmp/fatpack-wheels}"
levels="${2:-3,9,19}"
source "$root/scripts/cuda-env.sh"
cd "$root"
cargo build --release --locked -q -p fatpack
mkdir -p "$work"
if [ ! -x "$work/venv/bin/python" ]; then
    python3 -m venv "$work/venv"
fi
"$work/venv/bin/pip" install -q --no-deps nvidia-cublas nvidia-cusparse
site="$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
"$work/venv/bin/pip" list 2>/dev/null | grep -i "^nvidia-" | sed 's/^/wheels: /'
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
for lib in libcublasLt.so libcusparse.so; do
    f="$(find "$site/nvidia" -name "$lib.*" -type f | sort | head -1)"
    [ -n "$f" ] || { echo "no $lib in the wheels" >&2; exit 1; }
    echo
    echo "== $(basename "$f") ($(stat -c %s "$f") bytes)"
    # nvcc's rows (fatbinary itself) and the raw-level rows; fatpack's own stores are measured
    # on the bytes its commands write by bench/store_shipped.sh.
    cargo bench -q --bench store_sizes -- "--levels=$levels" --no-dictionary "$f"
    x="$work/extract-$lib"
    rm -rf "$x"
    ./target/release/fatpack extract "$f" -o "$x" >/dev/null
    t0=$(date +%s.%N)
    n=$(find "$x" -type f \( -name '*.cubin' -o -name '*.ptx' \) -print0 | sort -z | xargs -0 cat | xz -9e -T0 | wc -c)
    t1=$(date +%s.%N)
    printf '| xz -9e over the extracted entries (limit) | %.2f MiB | %.0f s |\n' "$(echo "$n / 1048576" | bc -l)" "$(echo "$t1 - $t0" | bc -l)"
    # A packed link of objects carrying these cubins (uncompressed) against plain ld: wall,
    # peak RSS, output size. 1300 MiB stays under 2 GiB, so plain ld links too.
    if [ "${LINK:-1}" = 1 ]; then
        echo
        echo "link, 1300 MiB of $(basename "$f")'s cubins in 16 objects:"
        bash "$root/bench/link_time.sh" 1300 16 "$work/link-$lib" "$f" | grep -v '^verbose: fatpack:   rewrote'
        rm -rf "$work/link-$lib"
    fi
done
