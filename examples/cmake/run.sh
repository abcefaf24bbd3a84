#!/usr/bin/env bash
# Builds this CMake project with fatpack as the linker, runs it, and checks with
# `fatpack inspect --json` that the shared library and the executable are packed (and that
# the compile commands are those of a build without fatpack).
#
#   bash examples/cmake/run.sh [VARIANT...]
#
# Variants (default: toolchain flags rdc, plus ninja if ninja is installed, plus linker-type
# if cmake >= 3.29):
#   toolchain    -DCMAKE_TOOLCHAIN_FILE=fatpack-toolchain.cmake, default generator (Makefiles)
#   flags        no toolchain file: -DCMAKE_{EXE,SHARED}_LINKER_FLAGS="-B<wrap> -Wl,--fatpack-side-file"
#   rdc          the toolchain file with CMAKE_CUDA_SEPARABLE_COMPILATION=ON (nvcc -dlink steps)
#   ninja        the toolchain file with -G Ninja
#   linker-type  CMake >= 3.29's CMAKE_LINKER_TYPE with CMAKE_<LANG>_USING_LINKER_FATPACK=-B<wrap>
#
# Environment: FATPACK_BIN (default target/release/fatpack, built by scripts/build.sh if
# missing), FATPACK_RUNTIME (passed on to fatpack), CMAKE (default cmake), JOBS (default
# nproc), KEEP=1 keeps the build folders (under a temp dir, printed).
# The executable runs its GPU checks when a GPU is there, its host-only path otherwise.
set -euo pipefail
# Its programs hold less device code than `fatpack ld` packs by default (512 KiB,
# src/link/worth_packing.rs): ask for packing, as for any small program.
export FATPACK_MODE=packed
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cmake="${CMAKE:-cmake}"
jobs="${JOBS:-$(nproc)}"

command -v "$cmake" >/dev/null || { echo "run.sh: $cmake not found (apt-get install cmake)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "run.sh: python3 not found" >&2; exit 1; }
if ! command -v nvcc >/dev/null || [ -z "${CUDA_HOME:-}" ]; then
    # shellcheck disable=SC1091
    source "$root/scripts/cuda-env.sh"
fi
fatpack="${FATPACK_BIN:-$root/target/release/fatpack}"
if [ -z "${FATPACK_BIN:-}" ] && [ ! -x "$fatpack" ]; then
    bash "$root/scripts/build.sh"
fi
[ -x "$fatpack" ] || { echo "run.sh: fatpack binary $fatpack not found" >&2; exit 1; }
fatpack="$(cd "$(dirname "$fatpack")" && pwd)/$(basename "$fatpack")"

cmake_version="$("$cmake" --version | head -1 | awk '{print $3}')"
version_ge() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]; }

variants=("$@")
if [ ${#variants[@]} -eq 0 ]; then
    variants=(toolchain flags rdc mold run)
    if command -v ninja >/dev/null; then variants+=(ninja); fi
    if version_ge "$cmake_version" 3.29; then variants+=(linker-type); fi
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/fatpack-cmake.XXXXXX")"
if [ "${KEEP:-0}" = 1 ]; then
    echo "build folders kept in $work"
else
    trap 'rm -rf "$work"' EXIT
fi

echo "cmake $cmake_version, nvcc $(nvcc --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'), fatpack $fatpack"
report=()

# check_packed FILE MODULES STORE: packed by fatpack, digest matches, MODULES modules, each
# module from a .cu object holding sm_75/80/86/90 SASS, the store where STORE says.
check_packed() {
    "$fatpack" inspect --json "$1" > "$work/inspect.json"
    python3 - "$1" "$2" "$3" "$work/inspect.json" <<'PY'
import json, os, sys
path, want_modules, want_store = sys.argv[1], int(sys.argv[2]), sys.argv[3]
r = json.load(open(sys.argv[4]))[0]
name = os.path.basename(path)
p = r.get("packed")
assert p, f"{name}: not packed by fatpack"
assert p["digest_matches"] is True, f"{name}: store digest does not match"
if want_store == "section":
    assert p["store"] == ".fatpack section", f"{name}: store is {p['store']}"
else:
    assert p["store"].endswith(".fatpack") and os.path.exists(path + ".fatpack"), \
        f"{name}: store is {p['store']}, want the side file"
mods = r["modules"]
assert len(mods) == want_modules, f"{name}: {len(mods)} modules, want {want_modules}: " + \
    ", ".join(m["origin"] for m in mods)
want_sass = {"sm_75", "sm_80", "sm_86", "sm_90"}
for m in mods:
    if "cmake_device_link" in m["origin"]:
        continue
    sass = {e["arch"] for e in m["entries"] if e["kind"] == "sass"}
    assert want_sass <= sass, f"{name}: {m['origin']} has SASS {sorted(sass)}"
archs = sorted({a["arch"] for a in r["per_arch"]})
t = r["totals"]
print(f"{name}: {t['modules']} modules, {t['entries']} entries ({', '.join(archs)}), "
      f"{t['raw_size']} B -> {t['stored_size']} B in {p['store']}, digest ok")
PY
}

# A configure without fatpack: the compile commands every Makefiles variant must match.
if ! "$cmake" -S "$here" -B "$work/plain" -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
        > "$work/plain.configure.log" 2>&1; then
    cat "$work/plain.configure.log" >&2; echo "FAIL: configure without fatpack" >&2; exit 1
fi
same_compiles() { # BUILD_DIR: its compile commands equal the plain ones, build dir aside
    python3 - "$work/plain" "$1" <<'PY'
import json, sys
def load(d):
    return {c["file"]: c["command"].replace(d, "BUILD") for c in json.load(open(d + "/compile_commands.json"))}
plain, got = load(sys.argv[1]), load(sys.argv[2])
assert plain.keys() == got.keys(), (sorted(plain), sorted(got))
for f in plain:
    assert plain[f] == got[f], f"compile flags changed for {f}:\n  {plain[f]}\n  {got[f]}"
PY
}

for v in "${variants[@]}"; do
    b="$work/$v"
    wrap="$work/wrap-$v"
    args=(-S "$here" -B "$b" -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON)
    store=section so_mods=3 exe_mods=1 build_prefix=()
    case "$v" in
        toolchain) args+=("-DCMAKE_TOOLCHAIN_FILE=$here/fatpack-toolchain.cmake" "-DFATPACK=$fatpack") ;;
        ninja)
            command -v ninja >/dev/null || { echo "run.sh: ninja not installed" >&2; exit 1; }
            args+=(-G Ninja "-DCMAKE_TOOLCHAIN_FILE=$here/fatpack-toolchain.cmake" "-DFATPACK=$fatpack") ;;
        run)
            # A plain configure; the build runs under `fatpack run`, which makes fatpack the
            # linker of every compiler driver (COMPILER_PATH): nothing in the tree names it.
            build_prefix=("$fatpack" run --) ;;
        mold)
            # -fuse-ld=mold through the toolchain file: the driver finds ld.mold in its folder.
            command -v ld.mold >/dev/null || { echo "run.sh: mold not installed" >&2; exit 1; }
            args+=("-DCMAKE_TOOLCHAIN_FILE=$here/fatpack-toolchain.cmake" "-DFATPACK=$fatpack"
                   -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=mold -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=mold) ;;
        rdc)
            args+=("-DCMAKE_TOOLCHAIN_FILE=$here/fatpack-toolchain.cmake" "-DFATPACK=$fatpack"
                   -DCMAKE_CUDA_SEPARABLE_COMPILATION=ON)
            so_mods=4 exe_mods=2 ;;   # + the cmake_device_link.o of each target
        flags)
            mkdir -p "$wrap"
            for n in ld ld.bfd ld.gold ld.lld ld.mold; do ln -sf "$fatpack" "$wrap/$n"; done
            args+=("-DCMAKE_EXE_LINKER_FLAGS=-B$wrap -Wl,--fatpack-side-file"
                   "-DCMAKE_SHARED_LINKER_FLAGS=-B$wrap -Wl,--fatpack-side-file")
            store=side ;;
        linker-type)
            version_ge "$cmake_version" 3.29 || { echo "run.sh: linker-type needs cmake >= 3.29" >&2; exit 1; }
            mkdir -p "$wrap"
            for n in ld ld.bfd ld.gold ld.lld ld.mold; do ln -sf "$fatpack" "$wrap/$n"; done
            args+=(-DCMAKE_LINKER_TYPE=FATPACK "-DCMAKE_CXX_USING_LINKER_FATPACK=-B$wrap"
                   "-DCMAKE_CUDA_USING_LINKER_FATPACK=-B$wrap") ;;
        *) echo "run.sh: unknown variant $v" >&2; exit 2 ;;
    esac
    echo "== $v"
    t0=$(date +%s)
    if ! "$cmake" "${args[@]}" > "$b.configure.log" 2>&1; then
        cat "$b.configure.log" >&2; echo "FAIL: $v: configure" >&2; exit 1
    fi
    case "$v" in
        toolchain | flags | linker-type)
            same_compiles "$b" || { echo "FAIL: $v: the compile commands differ from a build without fatpack" >&2; exit 1; } ;;
    esac
    if ! "${build_prefix[@]}" "$cmake" --build "$b" -j "$jobs" --verbose > "$b.build.log" 2>&1; then
        tail -40 "$b.build.log" >&2; echo "FAIL: $v: build" >&2; exit 1
    fi
    # Both final links must have gone through the wrapper folder (-B...), none without it.
    links="$(grep -E -- '-o (lib)?vecops(_demo|\.so)( |$)' "$b.build.log" | grep -v -- ' -c ' | grep -v -- '-dlink' || true)"
    if [ "$v" != run ] && [ "$(grep -c -- ' -B/' <<<"$links")" != 2 ]; then
        printf '%s\n' "$links" >&2; echo "FAIL: $v: the link lines do not use fatpack (-B)" >&2; exit 1
    fi
    if [ "$v" = mold ]; then
        # Linked by mold (through fatpack as ld.mold), not by whatever ld came first.
        for f in "$b/libvecops.so" "$b/vecops_demo"; do
            readelf -p .comment "$f" | grep -q mold || { echo "FAIL: $v: $f not linked by mold" >&2; exit 1; }
        done
    fi
    check_packed "$b/libvecops.so" "$so_mods" "$store" || { echo "FAIL: $v: libvecops.so" >&2; exit 1; }
    check_packed "$b/vecops_demo" "$exe_mods" "$store" || { echo "FAIL: $v: vecops_demo" >&2; exit 1; }
    if ! out="$("$b/vecops_demo" 2>&1)"; then
        printf '%s\n' "$out" >&2; echo "FAIL: $v: vecops_demo exited non-zero" >&2; exit 1
    fi
    printf '%s\n' "$out"
    case "$out" in
        *"ok (no GPU)"* | *"ok (GPU)"*) ;;
        *) echo "FAIL: $v: vecops_demo printed no ok line" >&2; exit 1 ;;
    esac
    # Installed copies (CMake rewrites their RPATH in place) stay packed and run.
    "$cmake" --install "$b" --prefix "$b/inst" > "$b.install.log" 2>&1 ||
        { cat "$b.install.log" >&2; echo "FAIL: $v: install" >&2; exit 1; }
    inst_lib="$(find "$b/inst" -name libvecops.so | head -1)"
    if [ "$store" = side ]; then
        # install(TARGETS) knows nothing of side files: they must be installed along.
        cp "$b/libvecops.so.fatpack" "$inst_lib.fatpack"
        cp "$b/vecops_demo.fatpack" "$b/inst/bin/vecops_demo.fatpack"
    fi
    check_packed "$inst_lib" "$so_mods" "$store" >/dev/null || { echo "FAIL: $v: installed libvecops.so" >&2; exit 1; }
    check_packed "$b/inst/bin/vecops_demo" "$exe_mods" "$store" >/dev/null ||
        { echo "FAIL: $v: installed vecops_demo" >&2; exit 1; }
    "$b/inst/bin/vecops_demo" > "$b.installed.out" 2>&1 ||
        { cat "$b.installed.out" >&2; echo "FAIL: $v: installed vecops_demo exited non-zero" >&2; exit 1; }
    report+=("$v: packed .so + executable (built and installed), $(tail -1 <<<"$out" | cut -d: -f1) ($(( $(date +%s) - t0 )) s)")
done

echo "== cmake example: all ${#variants[@]} variant(s) passed"
printf '  %s\n' "${report[@]}"
