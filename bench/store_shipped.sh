#!/usr/bin/env bash
# Store sizes from the bytes the shipped commands write, on NVIDIA's own device code (the PyPI
# wheels nvidia-cublas: libcublasLt.so, nvidia-cusparse: libcusparse.so):
#
#   bash bench/store_shipped.sh [WORK=/tmp/fatpack-shipped] [FORMS]     (LIBS="libcublasLt.so libcusparse.so")
#
# For each library: every fatbin container of its .nv_fatbin, byte for byte as shipped, in
# objects registered as nvcc's host code registers them (examples/library-link); a program
# linked from them by plain ld and by `fatpack ld` (through gcc -B), then that packed program
# through `fatpack repack` in each FORM (default: "level19 release release-arch
# release-64 release-128"; a form is `level<N>`, `release`, `release-arch`, `release-<MiB>`
# or `release-arch-<MiB>`; `link-level<N>` is instead a link of the same objects with
# --fatpack-level=N). Sizes are the store's bytes as `fatpack inspect --json` reports
# them, against nvcc's `--compress-mode=size` on the same entries (`fatbinary` itself, run
# by `cargo bench --bench store_sizes -- --levels=none`; NVCC=0 leaves it out). Times are
# wall seconds of each command on this machine. Slow on few cores: level 19 writes a few
# MB/s per core.
set -euo pipefail
# Its programs hold less device code than `fatpack ld` packs by default (512 KiB,
# src/link/worth_packing.rs): ask for packing, as for any small program.
export FATPACK_MODE=packed
root="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-/tmp/fatpack-shipped}"
forms="${2:-level19 release release-arch release-64 release-128}"
source "$root/scripts/cuda-env.sh"
cd "$root"
bash scripts/build.sh >/dev/null
cargo build --release --locked -q --example library-link
fatpack="$root/target/release/fatpack"
mkdir -p "$work"
if [ ! -x "$work/venv/bin/python" ]; then
    python3 -m venv "$work/venv"
fi
"$work/venv/bin/pip" install -q --no-deps nvidia-cublas nvidia-cusparse
site="$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
"$work/venv/bin/pip" list 2>/dev/null | grep -i "^nvidia-" | sed 's/^/wheels: /'
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); fatpack $(git rev-parse --short HEAD)"
mkdir -p "$work/wrap"
ln -sf "$fatpack" "$work/wrap/ld"
libs="-L$CUDA_HOME/lib -lcudart_static -ldl -lpthread -lrt"
mib() { python3 -c "print(f'{$1/1048576:.2f}')"; }
store_bytes() { "$fatpack" inspect --json "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["packed"]["store_size"])'; }
timed() { # seconds of the command, its output discarded
    local s e
    s=$(date +%s.%N)
    "$@" >/dev/null 2>"$work/err.txt" || { cat "$work/err.txt" >&2; return 1; }
    e=$(date +%s.%N)
    python3 -c "print(f'{$e - $s:.1f}')"
}
for lib in ${LIBS:-libcublasLt.so libcusparse.so}; do
    f="$(find "$site/nvidia" -name "$lib.*" -type f | sort | head -1)"
    [ -n "$f" ] || { echo "no $lib in the wheels" >&2; exit 1; }
    d="$work/$lib"
    rm -rf "$d"
    echo
    echo "== $(basename "$f"): $(./target/release/examples/library-link "$d" "$f")"
    (cd "$d" && ls lib*.s | xargs -P "$(nproc)" -I{} sh -c 'as -o "$(basename {} .s).o" {}' && gcc -c main.c -o main.o)
    objs="$(cd "$d" && ls main.o lib*.o | sort -V | sed "s|^|$d/|" | tr '\n' ' ')"
    size_mode=""
    if [ "${NVCC:-1}" = 1 ]; then
        size_mode=$(cargo bench -q --bench store_sizes -- --levels=none --no-dictionary "$f" |
            awk -F'|' '/nvcc `--compress-mode=size/ { gsub(/ /, "", $3); print $3 }')
    fi
    ratio() { [ -n "$size_mode" ] && python3 -c "print(f'{$1/1048576/$size_mode:.3f}')" || echo "-"; }
    echo "| form | store MiB | vs nvcc size mode | command s | output file bytes |"
    echo "|---|---:|---:|---:|---:|"
    [ -n "$size_mode" ] && echo "| nvcc \`--compress-mode=size\` (fatbinary, the same entries) | $size_mode | 1.000 | - | - |"
    t=$(timed gcc -o "$d/plain" $objs $libs)
    echo "| plain ld (NVIDIA's containers as shipped) | - | - | $t | $(stat -c %s "$d/plain") |"
    t=$(timed gcc -B"$work/wrap" -o "$d/packed" $objs $libs)
    b=$(store_bytes "$d/packed")
    echo "| \`fatpack ld\` (default) | $(mib "$b") | $(ratio "$b") | $t | $(stat -c %s "$d/packed") |"
    for form in $forms; do
        if [ "${form#link-level}" != "$form" ]; then
            # The link itself with an explicit level (NVIDIA's frames compressed again, the
            # smaller of the two kept).
            t=$(timed gcc -B"$work/wrap" -Wl,--fatpack-level="${form#link-level}" -o "$d/$form" $objs $libs)
            b=$(store_bytes "$d/$form")
            echo "| \`fatpack ld --fatpack-level=${form#link-level}\` | $(mib "$b") | $(ratio "$b") | $t | $(stat -c %s "$d/$form") |"
            rm -f "$d/$form"
            continue
        fi
        case "$form" in
            level*) args=(--level "${form#level}") ;;
            release) args=(--release) ;;
            release-arch) args=(--release --group-by arch) ;;
            release-arch-*) args=(--release --group-by arch --group-mib "${form#release-arch-}") ;;
            release-*) args=(--release --group-mib "${form#release-}") ;;
            *) echo "unknown form $form" >&2; exit 2 ;;
        esac
        t=$(timed "$fatpack" repack "$d/packed" -o "$d/$form" "${args[@]}")
        b=$(store_bytes "$d/$form")
        echo "| \`fatpack repack ${args[*]}\` | $(mib "$b") | $(ratio "$b") | $t | $(stat -c %s "$d/$form") |"
        # Kept for the decode measurements (bench/first_use.sh) only when asked.
        [ "${KEEP:-0}" = 1 ] || rm -f "$d/$form"
    done
    rm -f "$d"/lib*.fatbin
done
