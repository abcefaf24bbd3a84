#!/usr/bin/env bash
# Builds examples/build-systems/vadd.cu through fatpack with each build system that installs
# here, exactly as docs/build-systems.md says, and checks that each output is packed (fatpack
# inspect: our archs there, digest matching) and runs (its host path without a GPU).
#   bash examples/build-systems/run.sh [make] [meson] [cmake-depfile]
# Environment: FATPACK_BIN (default target/release/fatpack, built if missing).
set -euo pipefail
# Its programs hold less device code than `fatpack ld` packs by default (512 KiB,
# src/link/worth_packing.rs): ask for packing, as for any small program.
export FATPACK_MODE=packed
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
[ ${#variants[@]} -gt 0 ] || variants=(make meson cmake-depfile)
tools() { # meson, ninja and cmake from PyPI (the versions pip serves), in a venv of their own
    [ -x "$root/.tools/bin/meson" ] && [ -x "$root/.tools/bin/cmake" ] || {
        python3 -m venv "$root/.tools"
        "$root/.tools/bin/pip" install -q --disable-pip-version-check meson ninja cmake
    }
}

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
        # The same Makefile with no FATPACK_WRAP, under `fatpack run`.
        make -s -C "$work" clean
        "$fatpack" run -- make -s -C "$work" CUDA_HOME="$CUDA_HOME" >/dev/null
        check "make under fatpack run" "$work/vadd"
        ;;
    meson)
        tools
        mkdir "$work/meson"
        cp "$here/vadd.cu" "$here/meson.build" "$work/meson/"
        PATH="$root/.tools/bin:$PATH" meson setup "$work/meson/build" "$work/meson" \
            -Dcuda_link_args="-Xcompiler=-B$work/wrap -L$CUDA_HOME/lib" >/dev/null
        PATH="$root/.tools/bin:$PATH" ninja -C "$work/meson/build" >/dev/null
        check meson "$work/meson/build/vadd"
        ;;
    cmake-depfile)
        # CMake >= 3.27 with Ninja links with `--dependency-file` when the linker takes it
        # (it turns this off for GNU ld < 2.41, so lld here, through CMAKE_LINKER_TYPE and an
        # ld.lld link in the folder). A second ninja must do nothing; touching a library the
        # link found by -l (known to Ninja only from the depfile) must relink.
        tools
        ln -sf "$fatpack" "$work/wrap/ld.lld"
        c="$work/cmake"
        mkdir -p "$c/src" "$c/lib"
        cp "$root/tests/fixtures/nvcc13/main.o" "$c/src/"
        cp "$root/tests/fixtures/nvcc13/libfixture.a" "$c/lib/"
        cat > "$c/src/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.29)
project(depfile CXX)
add_executable(app main.o)
set_source_files_properties(main.o PROPERTIES EXTERNAL_OBJECT TRUE)
set_target_properties(app PROPERTIES LINKER_LANGUAGE CXX)
target_link_directories(app PRIVATE $c/lib $CUDA_HOME/lib)
target_link_libraries(app PRIVATE fixture cudart_static dl pthread rt)
CM
        PATH="$root/.tools/bin:$PATH" cmake -S "$c/src" -B "$c/build" -G Ninja \
            -DCMAKE_LINKER_TYPE=LLD "-DCMAKE_EXE_LINKER_FLAGS=-B$work/wrap" >/dev/null
        grep -q -- "--dependency-file" "$c/build/build.ninja" ||
            { echo "cmake-depfile: CMake did not turn on the linker's depfile" >&2; exit 1; }
        nj() { PATH="$root/.tools/bin:$PATH" ninja -C "$c/build"; }
        nj >/dev/null
        nj | grep -q "no work to do" || { echo "cmake-depfile: the second ninja relinked" >&2; exit 1; }
        sleep 1; touch "$c/lib/libfixture.a"
        nj | grep -q "Linking CXX executable app" ||
            { echo "cmake-depfile: touching libfixture.a did not relink" >&2; exit 1; }
        out="$("$c/build/app")"
        [ "$out" = "fixture main ok" ] || { echo "cmake-depfile: $out" >&2; exit 1; }
        "$fatpack" inspect --json "$c/build/app" | python3 -c 'import json,sys; assert json.load(sys.stdin)[0]["packed"]["digest_matches"]'
        echo "  cmake-depfile: packed, incremental (no-op rebuild, relinks on a -l library touch)"
        ;;
    *) echo "run.sh: unknown variant $v" >&2; exit 2;;
    esac
done
echo "== build systems: all ${#variants[@]} linked through fatpack"
