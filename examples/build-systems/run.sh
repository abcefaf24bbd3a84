#!/usr/bin/env bash
# Builds examples/build-systems/vadd.cu through fatpack with each build system that installs
# here, exactly as docs/build-systems.md says, and checks that each output is packed (fatpack
# inspect: our archs there, digest matching) and runs (its host path without a GPU).
#   bash examples/build-systems/run.sh [make] [meson]
# Environment: FATPACK_BIN (default target/release/fatpack, built if missing).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck disable=SC1091
source "$root/scripts/cuda-env.sh"
fatpack="${FATPACK_BIN:-$root/target/release/fatpack}"
[ -x "$fatpack" ] || bash "$root/scripts/build.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir "$work/wrap"
ln -s "$fatpack" "$work/wrap/ld"
variants=("$@")
[ ${#variants[@]} -gt 0 ] || variants=(make meson)

check() { # $1: variant, $2: the built executable
    "$fatpack" inspect --json "$2" > "$work/$1.json"
    python3 - "$work/$1.json" "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]
assert r["packed"] and r["packed"]["digest_matches"], f"{sys.argv[2]}: not packed: {r.get('packed')}"
archs = sorted(e["arch"] for m in r["modules"] for e in m["entries"])
# meson may add its own default arch to ours.
assert {"compute_80", "sm_80", "sm_90"} <= set(archs), archs
PY
    out="$("$2")"
    case "$out" in "vadd: ok"*) ;; *) echo "$1: $out" >&2; exit 1;; esac
    echo "  $1: packed, runs ($out)"
}

for v in "${variants[@]}"; do
    case "$v" in
    make)
        cp "$here/vadd.cu" "$here/Makefile" "$work/"
        make -s -C "$work" FATPACK_WRAP="$work/wrap" CUDA_HOME="$CUDA_HOME" >/dev/null
        check make "$work/vadd"
        ;;
    meson)
        # meson and its ninja from PyPI (the versions pip serves), in a venv of their own.
        [ -x "$root/.tools/bin/meson" ] || {
            python3 -m venv "$root/.tools"
            "$root/.tools/bin/pip" install -q --disable-pip-version-check meson ninja
        }
        mkdir "$work/meson"
        cp "$here/vadd.cu" "$here/meson.build" "$work/meson/"
        PATH="$root/.tools/bin:$PATH" meson setup "$work/meson/build" "$work/meson" \
            -Dcuda_link_args="-Xcompiler=-B$work/wrap -L$CUDA_HOME/lib" >/dev/null
        PATH="$root/.tools/bin:$PATH" ninja -C "$work/meson/build" >/dev/null
        check meson "$work/meson/build/vadd"
        ;;
    *) echo "run.sh: unknown variant $v" >&2; exit 2;;
    esac
done
echo "== build systems: all ${#variants[@]} linked through fatpack"
