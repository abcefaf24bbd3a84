#!/usr/bin/env bash
# NVIDIA's own wheels from PyPI (nvidia-cufft, nvidia-cusparse, nvidia-cublas) pruned into
# per-GPU packages by the shipped command, and read back by the tools that will read them:
#
#   bash bench/package_variants.sh [WORK=/tmp/fatpack-variants]
#
# For each wheel: `fatpack prune --for 9.0` (the PEP 825 variant wheel), `--for 8.0,8.6,8.9`, and
# `--local-label --for 9.0`; wall time, peak RSS and sizes of each; variantlib validates
# every variant wheel and writes the index-level variants.json; its resolution is asked
# which wheel a 9.0, 8.0 and 7.5 machine gets; `fatpack index` writes the indexes, and pip
# resolves from the generic one (the fat wheel) and the sm90 one (the local-label wheel).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-/tmp/fatpack-variants}"
cd "$root"
cargo build --release --locked -q -p fatpack
fatpack="$root/target/release/fatpack"
mkdir -p "$work/dl"
[ -x "$work/venv/bin/python" ] || python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check "pip>=25.3" variantlib==0.2.2
(cd "$work/dl" && "$work/venv/bin/pip" download -q --disable-pip-version-check --no-deps \
    nvidia-cufft nvidia-cusparse nvidia-cublas)
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(date -u +%F)"
echo "tools: $("$work/venv/bin/pip" --version | cut -d' ' -f1-2), variantlib $("$work/venv/bin/python" -c 'import importlib.metadata as m; print(m.version("variantlib"))')"
echo
echo "| wheel | form | MB before | MB after | ratio | wall s | peak MB | claims |"
echo "|---|---|---:|---:|---:|---:|---:|---|"
for w in "$work"/dl/*.whl; do
    dist="$work/dist-$(basename "$w" | cut -d- -f1)"
    rm -rf "$dist" "$dist-site"
    mkdir -p "$dist"
    cp "$w" "$dist/"
    for form in "--for 9.0" "--for 8.0,8.6,8.9" "--local-label --for 9.0"; do
        log="$work/prune.log"
        # shellcheck disable=SC2086
        /usr/bin/time -f "time %e %M" "$fatpack" prune $form "$w" -o "$dist" 2> "$log"
        out="$(sed -n 's/^fatpack prune: wrote \(.*\)$/\1/p' "$log")"
        claims="$(sed -n 's/^fatpack prune: serves GPUs \(.*\) as the whole build did$/\1/p' "$log")"
        read -r _ wall kib < <(grep '^time ' "$log")
        a=$(stat -c %s "$w"); b=$(stat -c %s "$out")
        printf '| %s | %s | %.1f | %.1f | %.3f | %.1f | %.0f | %s |\n' "$(basename "$w" | cut -d- -f1-2)" \
            "$form" "$(echo "$a/1000000" | bc -l)" "$(echo "$b/1000000" | bc -l)" "$(echo "$b/$a" | bc -l)" \
            "$wall" "$(echo "$kib/1000" | bc -l)" "$claims"
    done
    for v in "$dist"/*-sm*.whl; do
        said="$("$work/venv/bin/variantlib" analyze-wheel -i "$v" 2>&1)"
        [[ "$said" == *"is a Wheel Variant"* ]] || { echo "variantlib does not read $v: $said" >&2; exit 1; }
    done
    "$work/venv/bin/variantlib" generate-index-json -d "$dist" >/dev/null 2>&1
    vj="$(ls "$dist"/*-variants.json)"
    picks=""
    for gpu in 90 80 75; do
        picks+=" ${gpu}->$("$work/venv/bin/python" tests/it/packages/resolve_variant.py "$vj" "$gpu")"
    done
    rm -f "$vj"
    "$fatpack" index "$dist" -o "$dist-site" 2>/dev/null
    name="$(basename "$w" | cut -d- -f1)"
    generic="$("$work/venv/bin/pip" install --dry-run --no-deps --disable-pip-version-check \
        --index-url "file://$dist-site/simple" "$name" 2>&1 | sed -n 's/^Would install //p')"
    sm90="$("$work/venv/bin/pip" install --dry-run --no-deps --disable-pip-version-check \
        --index-url "file://$dist-site/sm90/simple" "$name" 2>&1 | sed -n 's/^Would install //p')"
    links="$("$work/venv/bin/pip" install --dry-run --no-deps --disable-pip-version-check --no-index \
        --find-links "$dist" "$name" 2>&1 | sed -n 's/^Would install //p')"
    echo "  $name: variantlib picks$picks; pip from SITE/simple: $generic; from SITE/sm90/simple: $sm90; --find-links over all: $links"
done
