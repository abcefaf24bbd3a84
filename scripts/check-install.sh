#!/usr/bin/env bash
# The install paths a new user takes, each on its own and from nothing else:
#   1. `cargo install --path . --root DIR`, then DIR/bin/fatpack;
#   2. a plain `cargo build --release` binary;
#   3. the Python wheel (maturin, `bindings = "bin"`) installed into a fresh venv.
# Each one links the committed nvcc fixtures through `g++ -B<dir with ld -> fatpack>` in the
# packed and the tail mode, with no FATPACK_RUNTIME, and the outputs must run (host code
# only: no GPU here) and inspect as packed. Needs the CUDA toolchain (scripts/cuda-env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
source scripts/cuda-env.sh
unset FATPACK_RUNTIME FATPACK_REAL_LD
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# $1: a fatpack binary, $2: a label. Links and runs the fixture program both ways.
check() {
    local fp="$1" label="$2" d="$work/$2" f="$root/tests/fixtures/nvcc13"
    mkdir -p "$d/wrap"
    ln -s "$fp" "$d/wrap/ld"
    "$fp" --version | sed "s/^/$label: /"
    for mode in packed tail; do
        g++ -B"$d/wrap" -Wl,--fatpack-mode=$mode -o "$d/app_$mode" \
            "$f/main.o" "$f/kernels.o" "$f/other.o" \
            -L"$CUDA_HOME/lib" -lcudart_static -ldl -lpthread -lrt
        out="$("$d/app_$mode")"
        [ "$out" = "fixture main ok" ] || { echo "$label $mode: ran with '$out'" >&2; exit 1; }
    done
    "$fp" inspect --json "$d/app_packed" > "$d/inspect.json"
    python3 - "$d/inspect.json" "$label" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]
assert r["packed"] and r["packed"]["digest_matches"], r.get("packed")
assert len(r["modules"]) == 3, len(r["modules"])
print(f"{sys.argv[2]}: packed and tail links run; {len(r['modules'])} modules in the store")
PY
}

echo "== cargo install --path . --root DIR"
cargo install --quiet --locked --path . --root "$work/root"
[ "$(ls "$work/root/bin")" = "fatpack" ] || { echo "cargo install put more than fatpack in bin/" >&2; exit 1; }
check "$work/root/bin/fatpack" cargo-install

echo "== cargo build --release"
cargo build --quiet --release --locked -p fatpack
cp target/release/fatpack "$work/fatpack-release"
check "$work/fatpack-release" cargo-build

echo "== Python wheel (maturin) in a fresh venv"
python3 -m venv "$work/tools"
"$work/tools/bin/pip" install -q --disable-pip-version-check maturin==1.16.0
"$work/tools/bin/maturin" build --quiet --release --locked --out "$work/wheels" >/dev/null
wheel="$(ls "$work"/wheels/fatpack_cuda-*.whl)"
echo "wheel: $(basename "$wheel") ($(stat -c %s "$wheel") bytes)"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check --no-index "$wheel"
check "$work/venv/bin/fatpack" wheel
# The man page and completions come with it, under the environment's share/.
for f in share/man/man1/fatpack.1 share/bash-completion/completions/fatpack \
    share/zsh/site-functions/_fatpack share/fish/vendor_completions.d/fatpack.fish; do
    [ -s "$work/venv/$f" ] || { echo "check-install: the wheel did not install $f" >&2; exit 1; }
done
MANPATH="$work/venv/share/man" man -w fatpack >/dev/null 2>&1 ||
    { command -v man >/dev/null && { echo "check-install: man does not find fatpack" >&2; exit 1; }; }
echo "check-install: all three install paths link and run the fixtures"
