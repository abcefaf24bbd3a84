#!/usr/bin/env bash
# Peak memory and time of `prune --for 9.0` and `inspect` on packages with a big member, in
# every format (wheel, .conda, .tar.bz2, deb): the fat ELF fixture with MIB MiB after its
# sections, and MIB MiB of data beside it (tests/it/packages/big.py writes them, streamed);
# then NVIDIA's real wheels from PyPI (cuSPARSE's cu12 and cu13 builds, cuFFT's, whose
# program data holds its fatbins) pruned for 9.0,
# ROUNDS rounds each, NEW and OLD alternated, their outputs compared byte for byte.
#
#   bash bench/package_memory.sh NEW [OLD] [MIB=1024] [ROUNDS=3]
set -euo pipefail
new="$(realpath "$1")"; old="${2:+$(realpath "$2")}"; mib="${3:-1024}"; rounds="${4:-3}"
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check zstandard==0.23.0
peak() { # LABEL BIN ARGS...: one line, peak KiB and seconds
    local label="$1"; shift
    /usr/bin/time -f "$label %M KiB %e s" "$@" 2>&1 >/dev/null | grep -E "^$label " || true
}
echo "== a ${mib} MiB member, every format (peak KiB, seconds)"
for format in wheel conda tarbz2 deb; do
    for kind in elf data; do
        pkg="$("$work/venv/bin/python" "$root/tests/it/packages/big.py" "$work/$format-$kind" \
            "$format" "$kind" "$mib" "$root/tests/fixtures/nvcc13/libfixture.so")"
        for who in new ${old:+old}; do
            bin="$new"; [ "$who" = old ] && bin="$old"
            rm -rf "$work/out"
            peak "$who prune $format $kind" "$bin" prune --for 9.0 "$pkg" -o "$work/out"
            peak "$who inspect $format $kind" "$bin" inspect "$pkg"
        done
        rm -rf "$work/$format-$kind"
    done
done
echo "== NVIDIA's wheels from PyPI, prune --for 9.0 ($rounds rounds)"
for dist in nvidia-cusparse-cu12 nvidia-cusparse nvidia-cufft; do
    "$work/venv/bin/pip" download -q --disable-pip-version-check --no-deps "$dist" -d "$work/$dist"
    wheel="$(ls "$work/$dist"/*.whl)"
    echo "$(basename "$wheel"): $(stat -c %s "$wheel") bytes"
    for r in $(seq "$rounds"); do
        for who in new ${old:+old}; do
            bin="$new"; [ "$who" = old ] && bin="$old"
            rm -rf "$work/out-$who"
            peak "$who $dist round $r" "$bin" prune --for 9.0 "$wheel" -o "$work/out-$who"
        done
    done
    if [ -n "$old" ]; then
        cmp "$work"/out-new/*.whl "$work"/out-old/*.whl && echo "outputs byte-identical"
    fi
    rm -rf "$work/$dist"
done
