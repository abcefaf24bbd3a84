#!/usr/bin/env bash
# The install paths a new user takes, each on its own and from nothing else:
#   1. `cargo install --path . --root DIR`, then DIR/bin/fatpack;
#   2. a plain `cargo build --release` binary;
#   3. the Python wheel (maturin, `bindings = "bin"`) installed into a fresh venv.
# Each one links the committed nvcc fixtures through `g++ -B<dir with ld -> fatpack>` in the
# packed and the tail mode, with no FATPACK_RUNTIME, and the outputs must run (host code
# only: no GPU here) and inspect as packed. Needs the CUDA toolchain (scripts/cuda-env.sh).
set -euo pipefail
# Its programs hold less device code than `fatpack ld` packs by default (512 KiB,
# src/link/worth_packing.rs): ask for packing, as for any small program.
export FATPACK_MODE=packed
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

echo "== cargo install --path . --root DIR (with hardening flags for the runtime)"
# A distribution's hardening flags reach the runtime fatpack links into users' binaries
# through FATPACK_RT_CFLAGS / FATPACK_RT_RUSTFLAGS (RUSTFLAGS and CFLAGS do not: they are the
# CLI's). -fstack-protector-all makes zstd's C call __stack_chk_fail: checked below.
FATPACK_RT_CFLAGS="-fstack-protector-all -D_FORTIFY_SOURCE=2" FATPACK_RT_RUSTFLAGS="-Coverflow-checks=on" \
    cargo install --quiet --locked --path . --root "$work/root"
[ "$(ls "$work/root/bin")" = "fatpack" ] || { echo "cargo install put more than fatpack in bin/" >&2; exit 1; }
check "$work/root/bin/fatpack" cargo-install
stack_checks() { # FATPACK: does the runtime it links call __stack_chk_fail?
    local d="$work/rt-$RANDOM" f="$root/tests/fixtures/nvcc13"
    mkdir -p "$d/wrap" && ln -s "$1" "$d/wrap/ld"
    g++ -B"$d/wrap" -Wl,--fatpack-save-temps -o "$d/app" "$f/main.o" "$f/kernels.o" \
        "$f/other.o" -L"$CUDA_HOME/lib" -lcudart_static -ldl -lpthread -lrt 2>/dev/null
    local syms
    syms="$(nm "$d/app.fatpack-temps/libfatpack_rt.a")"
    grep -q ' U __stack_chk_fail' <<<"$syms"
}
stack_checks "$work/root/bin/fatpack" ||
    { echo "check-install: FATPACK_RT_CFLAGS did not reach the runtime" >&2; exit 1; }
# `man fatpack` after cargo install: the man page and completions beside bin/, found by
# man through PATH (as ~/.cargo/bin gives ~/.cargo/share/man).
"$work/root/bin/fatpack" man --install >/dev/null
finds_man() { # BIN_DIR PAGE WANT
    local got
    got="$(env -u MANPATH PATH="$1:/usr/bin:/bin" man -w "$2")" ||
        { echo "check-install: man does not find $2 with $1 on PATH" >&2; exit 1; }
    [ "$got" = "$3" ] || { echo "check-install: man finds $got, want $3" >&2; exit 1; }
}
finds_man "$work/root/bin" fatpack "$work/root/share/man/man1/fatpack.1"
# Each command's own page, as fatpack(1) names it.
for page in fatpack-prune fatpack-ld fatpack-inspect; do
    finds_man "$work/root/bin" "$page" "$work/root/share/man/man1/$page.1"
done
[ -s "$work/root/share/bash-completion/completions/fatpack" ] ||
    { echo "check-install: fatpack man --install wrote no bash completion" >&2; exit 1; }

echo "== cargo build --release"
cargo build --quiet --release --locked -p fatpack
cp target/release/fatpack "$work/fatpack-release"
check "$work/fatpack-release" cargo-build
! stack_checks "$work/fatpack-release" ||
    { echo "check-install: the default runtime has stack checks: the test above proves nothing" >&2; exit 1; }

echo "== Python wheel (maturin) in a fresh venv"
python3 -m venv "$work/tools"
"$work/tools/bin/pip" install -q --disable-pip-version-check maturin==1.16.0 ziglang==0.17.1 \
    auditwheel==6.8.2
# Linked by zig against glibc 2.28's symbols: installs in manylinux_2_28 images (PyTorch's
# build images) and anything newer, whatever glibc built it.
PATH="$work/tools/bin:$PATH" "$work/tools/bin/maturin" build --quiet --release --locked \
    --zig --compatibility manylinux_2_28 --out "$work/wheels" >/dev/null
wheel="$(ls "$work"/wheels/fatpack_cuda-*.whl)"
echo "wheel: $(basename "$wheel") ($(stat -c %s "$wheel") bytes)"
"$work/tools/bin/auditwheel" show "$wheel" > "$work/auditwheel.txt"
grep -q 'consistent[[:space:]]*with the following platform tag: "manylinux_2_28_'"$(uname -m)"'"' \
    <(tr '\n' ' ' < "$work/auditwheel.txt") ||
    { cat "$work/auditwheel.txt" >&2; echo "check-install: the wheel is not manylinux_2_28" >&2; exit 1; }
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check --no-index "$wheel"
check "$work/venv/bin/fatpack" wheel
# The man page and completions come with it, under the environment's share/.
for f in share/man/man1/fatpack.1 share/bash-completion/completions/fatpack \
    share/zsh/site-functions/_fatpack share/fish/vendor_completions.d/fatpack.fish; do
    [ -s "$work/venv/$f" ] || { echo "check-install: the wheel did not install $f" >&2; exit 1; }
done
finds_man "$work/venv/bin" fatpack "$work/venv/share/man/man1/fatpack.1"
finds_man "$work/venv/bin" fatpack-prune "$work/venv/share/man/man1/fatpack-prune.1"
echo "check-install: all three install paths link and run the fixtures"
