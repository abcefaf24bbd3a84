#!/usr/bin/env bash
# Tests nix/setup-hook.sh without Nix: sources it in plain bash with a fake build
# environment, checks what it sets, and links the committed nvcc fixture objects through it
# (directly, and through a stand-in for nixpkgs' cc-wrapper that orders flags as it does).
#
#   bash nix/test-hook.sh
#
# Environment: FATPACK_BIN (default target/release/fatpack, built by scripts/build.sh if
# missing), FATPACK_RUNTIME (passed on), CUDA_HOME (else scripts/cuda-env.sh is sourced).
# The cases set the hook's inputs (read by the sourced hook) in subshells, on purpose.
# shellcheck disable=SC2030,SC2031,SC2034,SC2178
set -euo pipefail
# Its programs hold less device code than `fatpack ld` packs by default (512 KiB,
# src/link/worth_packing.rs): ask for packing, as for any small program.
export FATPACK_MODE=packed
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
hook="$here/setup-hook.sh"
fixtures="$root/tests/fixtures/nvcc13"

fatpack="${FATPACK_BIN:-$root/target/release/fatpack}"
if [ -z "${FATPACK_BIN:-}" ] && [ ! -x "$fatpack" ]; then bash "$root/scripts/build.sh"; fi
[ -x "$fatpack" ] || { echo "test-hook: fatpack binary $fatpack not found" >&2; exit 1; }
fatpack="$(readlink -f "$fatpack")"
if [ -z "${CUDA_HOME:-}" ]; then
    # shellcheck disable=SC1091
    source "$root/scripts/cuda-env.sh"
fi
[ -f "$CUDA_HOME/lib/libcudart_static.a" ] || { echo "test-hook: no cudart in $CUDA_HOME/lib" >&2; exit 1; }
real_ld="$(type -P ld)" || { echo "test-hook: no ld on PATH" >&2; exit 1; }
command -v python3 >/dev/null || { echo "test-hook: python3 not found" >&2; exit 1; }

work="$(mktemp -d "${TMPDIR:-/tmp}/fatpack-nix-hook.XXXXXX")"
trap 'rm -rf "$work"' EXIT
libs=(-L"$CUDA_HOME/lib" -lcudart_static -ldl -lpthread -lrt)
objs=("$fixtures/main.o" "$fixtures/kernels.o" "$fixtures/other.o")

passed=0 failed=0 names=()
# Each case runs in a subshell with a clean slate of the variables the hook reads or sets.
case_() {
    local name="$1"; shift
    local log="$work/$name.log" rc
    # Not in an `if`: there bash would ignore `set -e` inside the subshell too.
    set +e
    (
        unset NIX_CFLAGS_COMPILE NIX_CFLAGS_COMPILE_BEFORE NIX_CFLAGS_LINK NIX_LDFLAGS NIX_LDFLAGS_BEFORE \
            FATPACK_CACHE_DIR \
            NIX_BUILD_TOP FATPACK_REAL_LD dontUseFatpack fatpackFlags fatpackWrapDir \
            fatpackHookSourced postHooks
        unset -f runHook fatpackSetupLinker
        export FATPACK_BIN="$fatpack"
        export TMPDIR="$work/tmp-$name"
        mkdir -p "$TMPDIR"
        cd "$work"
        set -euo pipefail
        "$@"
    ) >"$log" 2>&1
    rc=$?
    set -e
    if [ "$rc" -eq 0 ]; then
        passed=$((passed + 1)); echo "ok   $name"
    else
        failed=$((failed + 1)); names+=("$name"); echo "FAIL $name"; sed 's/^/     /' "$log"
    fi
}
fail() { echo "$*" >&2; exit 1; }
eq() { [ "$1" = "$2" ] || fail "$3: got [$1], want [$2]"; }
# shellcheck disable=SC2048,SC2086 # split the flag string into words, as the wrapper does
count_B() { local n=0 w; for w in $*; do case "$w" in -B*) n=$((n + 1)) ;; esac; done; echo "$n"; }
wrap_dirs() { find "$TMPDIR" -maxdepth 1 -name 'fatpack-wrap*' | wc -l; }
is_packed() { # FILE STORE(section|side)
    "$fatpack" inspect --json "$1" | python3 -c '
import json, sys
r = json.load(sys.stdin)[0]
p = r.get("packed")
assert p and p["digest_matches"] is True, "not packed / digest mismatch"
want = sys.argv[1]
assert (p["store"] == ".fatpack section") == (want == "section"), p["store"]
assert len(r["modules"]) == 3, [m["origin"] for m in r["modules"]]
' "$2"
}

t_sets_up() {
    export NIX_CFLAGS_COMPILE="-isystem /fake/include -O2"
    export NIX_CFLAGS_LINK="-L/fake/lib -lfake"
    # shellcheck disable=SC1090
    source "$hook"
    local d="${fatpackWrapDir:?fatpackWrapDir not set}"
    [ -d "$d" ] || fail "no wrapper dir $d"
    case "$d" in "$TMPDIR"/fatpack-wrap.*) ;; *) fail "wrapper dir $d not under TMPDIR" ;; esac
    for n in ld ld.bfd ld.gold ld.lld ld.mold; do
        [ -L "$d/$n" ] || fail "$d/$n is not a symlink"
        eq "$(readlink -f "$d/$n")" "$fatpack" "$n target"
    done
    eq "$NIX_CFLAGS_COMPILE_BEFORE" "-B$d" NIX_CFLAGS_COMPILE_BEFORE
    eq "$NIX_CFLAGS_COMPILE" "-isystem /fake/include -O2" "NIX_CFLAGS_COMPILE (unchanged)"
    eq "$NIX_CFLAGS_LINK" "-L/fake/lib -lfake" "NIX_CFLAGS_LINK (no fatpackFlags)"
    eq "$(count_B "$NIX_CFLAGS_COMPILE_BEFORE $NIX_CFLAGS_COMPILE $NIX_CFLAGS_LINK")" 1 "-B count"
    eq "$FATPACK_REAL_LD" "$real_ld" FATPACK_REAL_LD
    [ "$(readlink -f "$FATPACK_REAL_LD")" != "$fatpack" ] || fail "FATPACK_REAL_LD is fatpack"
    # Exported, so that the compiler driver's children see them.
    eq "$(bash -c 'echo "$FATPACK_REAL_LD|$NIX_CFLAGS_COMPILE_BEFORE"')" "$real_ld|-B$d" exported
}

t_idempotent() {
    export NIX_CFLAGS_LINK="-L/fake/lib"
    fatpackFlags="--fatpack-side-file"
    # shellcheck disable=SC1090
    source "$hook"
    local before after
    before="$(declare -p NIX_CFLAGS_COMPILE_BEFORE NIX_CFLAGS_LINK FATPACK_REAL_LD fatpackWrapDir)"
    # shellcheck disable=SC1090
    source "$hook"
    fatpackSetupLinker
    after="$(declare -p NIX_CFLAGS_COMPILE_BEFORE NIX_CFLAGS_LINK FATPACK_REAL_LD fatpackWrapDir)"
    eq "$after" "$before" "state after sourcing twice and calling again"
    eq "$(wrap_dirs)" 1 "wrapper dirs made"
    eq "$(count_B "$NIX_CFLAGS_COMPILE_BEFORE $NIX_CFLAGS_LINK")" 1 "-B count"
}

t_opt_out() {
    export NIX_CFLAGS_LINK="-L/fake/lib"
    dontUseFatpack=1
    fatpackFlags="--fatpack-side-file"
    # shellcheck disable=SC1090
    source "$hook"
    eq "${NIX_CFLAGS_COMPILE_BEFORE-unset}" unset NIX_CFLAGS_COMPILE_BEFORE
    eq "$NIX_CFLAGS_LINK" "-L/fake/lib" NIX_CFLAGS_LINK
    eq "${FATPACK_REAL_LD-unset}" unset FATPACK_REAL_LD
    eq "${fatpackWrapDir-unset}" unset fatpackWrapDir
    eq "$(wrap_dirs)" 0 "wrapper dirs made"
}

t_flags_string() {
    export NIX_CFLAGS_LINK="-L/fake/lib"
    fatpackFlags="--fatpack-side-file  --fatpack-level=3"
    # shellcheck disable=SC1090
    source "$hook"
    eq "$NIX_CFLAGS_LINK" "-L/fake/lib -Wl,--fatpack-side-file -Wl,--fatpack-level=3" NIX_CFLAGS_LINK
    eq "$(count_B "$NIX_CFLAGS_LINK")" 0 "-B in NIX_CFLAGS_LINK"
}

t_flags_array() { # __structuredAttrs: fatpackFlags is a bash array; NIX_CFLAGS_LINK unset
    fatpackFlags=(--fatpack-verbose --fatpack-level=5)
    # shellcheck disable=SC1090
    source "$hook"
    eq "$NIX_CFLAGS_LINK" "-Wl,--fatpack-verbose -Wl,--fatpack-level=5" NIX_CFLAGS_LINK
}

t_real_ld_skips_fatpack() { # an ld on PATH that is fatpack is passed over
    mkdir -p "$work/selfpath"
    ln -sf "$fatpack" "$work/selfpath/ld"
    PATH="$work/selfpath:$PATH"
    # shellcheck disable=SC1090
    source "$hook"
    eq "$FATPACK_REAL_LD" "$real_ld" FATPACK_REAL_LD
}

t_real_ld_kept() {
    export FATPACK_REAL_LD=/opt/custom/ld
    # shellcheck disable=SC1090
    source "$hook"
    eq "$FATPACK_REAL_LD" /opt/custom/ld "FATPACK_REAL_LD (preset)"
    (
        unset fatpackWrapDir fatpackHookSourced
        export FATPACK_REAL_LD=
        # shellcheck disable=SC1090
        source "$hook"
        eq "${FATPACK_REAL_LD-unset}" "" "FATPACK_REAL_LD (preset empty)"
    )
}

t_nix_build_top() {
    export NIX_BUILD_TOP="$work/build-top"
    mkdir -p "$NIX_BUILD_TOP"
    # shellcheck disable=SC1090
    source "$hook"
    eq "$fatpackWrapDir" "$NIX_BUILD_TOP/fatpack-wrap" fatpackWrapDir
    [ -L "$NIX_BUILD_TOP/fatpack-wrap/ld" ] || fail "no ld link"
    eq "$FATPACK_CACHE_DIR" "$NIX_BUILD_TOP/fatpack-cache" FATPACK_CACHE_DIR
    # One already set (empty: no cache) is kept.
    unset fatpackWrapDir
    export FATPACK_CACHE_DIR=
    # shellcheck disable=SC1090
    source "$hook"
    eq "${FATPACK_CACHE_DIR-unset}" "" "FATPACK_CACHE_DIR set before"
}

t_stdenv_post_hook() { # inside stdenv: registered in postHooks, run by `runHook postHook`
    runHook() {
        local arr="${1%Hook}Hooks[@]" f
        for f in ${!arr+"${!arr}"}; do "$f"; done
    }
    postHooks=()
    # shellcheck disable=SC1090
    source "$hook"
    # shellcheck disable=SC1090
    source "$hook"
    eq "${postHooks[*]}" fatpackSetupLinker postHooks
    eq "${fatpackWrapDir-unset}" unset "fatpackWrapDir before postHook"
    runHook postHook
    [ -L "$fatpackWrapDir/ld" ] || fail "no ld link after postHook"
    eq "$(count_B "$NIX_CFLAGS_COMPILE_BEFORE")" 1 "-B count"
}

t_missing_fatpack() {
    export FATPACK_BIN="$work/no-such-fatpack"
    # shellcheck disable=SC1090
    if source "$hook" 2>"$work/missing.err"; then fail "sourcing succeeded without fatpack"; fi
    grep -q "no-such-fatpack" "$work/missing.err" || fail "no message naming the binary"
    eq "${NIX_CFLAGS_COMPILE_BEFORE-unset}" unset NIX_CFLAGS_COMPILE_BEFORE
}

t_link_plain() { # the hook's flags on a plain g++ link line, as the cc-wrapper adds them
    export NIX_CFLAGS_LINK="-L$CUDA_HOME/lib"
    # shellcheck disable=SC1090
    source "$hook"
    # shellcheck disable=SC2086
    g++ $NIX_CFLAGS_COMPILE_BEFORE -o app "${objs[@]}" "${libs[@]}" $NIX_CFLAGS_LINK
    eq "$(./app)" "fixture main ok" "app output"
    is_packed app section
}

t_link_mold() { # -fuse-ld=mold goes through fatpack too (ld.mold in the folder)
    command -v ld.mold >/dev/null || fail "ld.mold not installed (apt-get install mold)"
    export NIX_CFLAGS_LINK="-L$CUDA_HOME/lib"
    # Real linker per name: mold itself links.
    export FATPACK_REAL_LD=""
    # shellcheck disable=SC1090
    source "$hook"
    # shellcheck disable=SC2086
    g++ $NIX_CFLAGS_COMPILE_BEFORE -fuse-ld=mold -o app "${objs[@]}" "${libs[@]}" $NIX_CFLAGS_LINK
    is_packed app section
    readelf -p .comment app | grep -q mold || fail "app was not linked by mold"
    eq "$(./app)" "fixture main ok" "app output"
}

t_survives_fixup() { # what stdenv's fixupPhase does to outputs: strip -S, patchelf
    export NIX_CFLAGS_LINK="-L$CUDA_HOME/lib"
    # shellcheck disable=SC1090
    source "$hook"
    # shellcheck disable=SC2086
    g++ $NIX_CFLAGS_COMPILE_BEFORE -o app "${objs[@]}" "${libs[@]}" $NIX_CFLAGS_LINK
    strip -S app
    if command -v patchelf >/dev/null; then
        patchelf --set-rpath /nix/store/00000000000000000000000000000000-x/lib app
        patchelf --shrink-rpath app
    fi
    is_packed app section
    eq "$(./app)" "fixture main ok" "app output"
}

# A stand-in for nixpkgs' cc-wrapper and bintools wrapper: the cc-wrapper calls the real
# driver as  [NIX_CFLAGS_COMPILE_BEFORE] ARGS -B<cc-wrapper>/bin/ [NIX_CFLAGS_COMPILE]
# [NIX_CFLAGS_LINK, when linking], and its bin/ holds `ld`, the bintools wrapper, which
# notes that it ran and calls the real ld as  [NIX_LDFLAGS_BEFORE] ARGS [NIX_LDFLAGS]
# (where nixpkgs' ld-wrapper puts them; NIX_LDFLAGS holds -L<input>/lib for every input).
make_fake_nix_cc() {
    local cc="$work/fake-cc" bt="$work/fake-bintools"
    mkdir -p "$cc/bin" "$bt/bin"
    cat >"$bt/bin/ld" <<EOF
#!/usr/bin/env bash
echo "bintools-wrapper ld \$*" >>"$work/bintools.calls"
exec "$real_ld" \${NIX_LDFLAGS_BEFORE:-} "\$@" \${NIX_LDFLAGS:-}
EOF
    chmod +x "$bt/bin/ld"
    ln -sf "$bt/bin/ld" "$cc/bin/ld"
    cat >"$cc/bin/g++" <<EOF
#!/usr/bin/env bash
dontLink=0
for a in "\$@"; do case "\$a" in -c|-S|-E|-M|-MM) dontLink=1 ;; esac; done
after=(-B$cc/bin/ \$NIX_CFLAGS_COMPILE)
[ \$dontLink = 1 ] || after+=(\$NIX_CFLAGS_LINK)
exec /usr/bin/g++ \$NIX_CFLAGS_COMPILE_BEFORE "\$@" "\${after[@]}"
EOF
    chmod +x "$cc/bin/g++"
    PATH="$cc/bin:$bt/bin:$PATH"
}

t_link_through_cc_wrapper() {
    make_fake_nix_cc
    export NIX_CFLAGS_COMPILE="-O2"
    export NIX_CFLAGS_LINK="-L$CUDA_HOME/lib"
    fatpackFlags="--fatpack-side-file"
    rm -f "$work/bintools.calls"
    # shellcheck disable=SC1090
    source "$hook"
    # The cc-wrapper's bin/ld is a link to the bintools wrapper's, as in nixpkgs.
    eq "$(readlink -f "$FATPACK_REAL_LD")" "$work/fake-bintools/bin/ld" "FATPACK_REAL_LD (the bintools wrapper)"
    # Compiles are unchanged: the same object with and without the hook's flags.
    printf 'int f(int x) { return x * 3; }\n' >f.cc
    g++ -g -c f.cc -o f-hook.o
    (unset NIX_CFLAGS_COMPILE_BEFORE; g++ -g -c f.cc -o f-plain.o)
    cmp f-hook.o f-plain.o || fail "the hook changed a compile's output"
    g++ -o app "${objs[@]}" "${libs[@]}"
    eq "$(./app)" "fixture main ok" "app output"
    is_packed app side
    [ -f app.fatpack ] || fail "no side file"
    grep -q -- "-o" "$work/bintools.calls" || fail "fatpack did not run the bintools wrapper's ld"
}

t_link_library_from_nix_ldflags() { # -lkern found only in a folder NIX_LDFLAGS names
    make_fake_nix_cc
    local dep="$work/dep/lib"
    mkdir -p "$dep"
    ar rcs "$dep/libkern.a" "$fixtures/kernels.o" "$fixtures/other.o"
    export NIX_CFLAGS_COMPILE="-O2" NIX_LDFLAGS="-L$dep -L$CUDA_HOME/lib"
    export NIX_BUILD_TOP="$work/build-top"
    mkdir -p "$NIX_BUILD_TOP"
    unset NIX_CFLAGS_LINK
    # shellcheck disable=SC1090
    source "$hook"
    rm -f "$work/bintools.calls"
    local i
    for i in 1 2; do
        rm -f app
        g++ -o app "$fixtures/main.o" -lkern -lcudart_static -ldl -lpthread -lrt
        eq "$(./app)" "fixture main ok" "app output, link $i"
        is_packed app section
        "$fatpack" inspect --json app | grep -q 'libkern.a(kernels.o)' ||
            fail "link $i: libkern.a's device code was not packed"
    done
    # The wrapper was asked where it searches once, for both links (kept in the build).
    eq "$(grep -c -- '--verbose' "$work/bintools.calls")" 1 "queries of the wrapper"
    # Another environment is another answer: asked again.
    NIX_LDFLAGS="-L$CUDA_HOME/lib -L$dep" g++ -o app "$fixtures/main.o" -lkern -lcudart_static -ldl -lpthread -lrt
    eq "$(grep -c -- '--verbose' "$work/bintools.calls")" 2 "queries of the wrapper, new environment"
}

t_link_only_flags_lose_to_cc_wrapper() { # why the hook does not use NIX_CFLAGS_LINK for -B
    make_fake_nix_cc
    local d="$work/naive-wrap"
    mkdir -p "$d"
    ln -sf "$fatpack" "$d/ld"
    export NIX_CFLAGS_LINK="-L$CUDA_HOME/lib -B$d"
    g++ -o app "${objs[@]}" "${libs[@]}"
    if "$fatpack" inspect --json app | grep -q '"packed": {'; then
        fail "a -B in NIX_CFLAGS_LINK won over the cc-wrapper's own -B (then it could be used)"
    fi
}

echo "nix hook tests: fatpack $fatpack, real ld $real_ld"
case_ sets-up t_sets_up
case_ idempotent t_idempotent
case_ opt-out t_opt_out
case_ flags-string t_flags_string
case_ flags-array t_flags_array
case_ real-ld-skips-fatpack t_real_ld_skips_fatpack
case_ real-ld-kept t_real_ld_kept
case_ nix-build-top t_nix_build_top
case_ stdenv-post-hook t_stdenv_post_hook
case_ missing-fatpack t_missing_fatpack
case_ link-plain t_link_plain
case_ link-mold t_link_mold
case_ survives-fixup t_survives_fixup
case_ link-through-cc-wrapper t_link_through_cc_wrapper
case_ link-library-from-nix-ldflags t_link_library_from_nix_ldflags
case_ link-only-flags-lose t_link_only_flags_lose_to_cc_wrapper
if [ "$failed" -ne 0 ]; then
    echo "nix hook tests: $failed of $((passed + failed)) FAILED: ${names[*]}"
    exit 1
fi
echo "nix hook tests: all $passed passed"
