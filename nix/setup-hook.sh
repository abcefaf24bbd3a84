# shellcheck shell=bash
# Setup hook of the fatpack package: with fatpack in a derivation's nativeBuildInputs, every
# link done through the compiler wrapper (gcc/g++/clang, and so nvcc, CMake, make, meson...)
# goes through `fatpack ld`. Sources and compile results are unchanged.
#
# What it does (fatpackSetupLinker, a plain bash function):
#   - makes a folder with ld, ld.bfd, ld.gold, ld.lld, ld.mold linked to fatpack
#     ($NIX_BUILD_TOP/fatpack-wrap in a Nix build, a fresh temp folder elsewhere);
#   - adds -B<folder> to NIX_CFLAGS_COMPILE_BEFORE. The driver looks for its linker in the
#     -B folders in order, and nixpkgs' cc-wrapper puts its own -B<cc-wrapper>/bin/ (which
#     holds the bintools wrapper's ld) at the head of NIX_CFLAGS_COMPILE, before
#     NIX_CFLAGS_LINK: only the _BEFORE flags come ahead of it. A -B folder holding nothing
#     but ld* changes nothing in a compile (same objects, byte for byte);
#   - adds -Wl,<flag> to NIX_CFLAGS_LINK (link steps only) for each entry of fatpackFlags;
#   - exports FATPACK_REAL_LD: the ld on PATH (the bintools wrapper, in Nix) found before
#     anything else, unless FATPACK_REAL_LD is already set. Set it to "" to have fatpack
#     look up the real linker per name instead (-fuse-ld=gold/lld/mold keeps gold/lld/mold then);
#   - in a Nix build, exports FATPACK_CACHE_DIR=$NIX_BUILD_TOP/fatpack-cache unless it is
#     set: what fatpack asks the bintools wrapper is asked once per build, not per link.
#
# Settings (derivation attributes or environment):
#   dontUseFatpack=1     do nothing
#   fatpackFlags         fatpack options, e.g. [ "--fatpack-side-file" "--fatpack-level=19" ]
#   FATPACK_BIN          the fatpack binary (default: the package's own, @fatpack@/bin/fatpack)
#
# In a Nix build the function runs from postHooks, once setup has put every input on PATH
# and before any phase; sourced outside stdenv (no runHook) it runs at once. Sourcing the
# file twice, or calling the function twice, changes nothing more.

fatpackSetupLinker() {
    if [[ -n "${dontUseFatpack:-}" ]]; then
        return 0
    fi
    if [[ -n "${fatpackWrapDir:-}" ]]; then
        return 0 # already done
    fi
    local bin="${FATPACK_BIN:-@fatpack@/bin/fatpack}"
    if [[ ! -x "$bin" ]]; then
        echo "fatpack setup hook: $bin is not an executable (set FATPACK_BIN)" >&2
        return 1
    fi
    bin="$(readlink -f "$bin")"

    # The real linker: first ld on PATH that is not fatpack.
    if [[ -z "${FATPACK_REAL_LD+set}" ]]; then
        local cand
        while IFS= read -r cand; do
            if [[ -n "$cand" && "$(readlink -f "$cand")" != "$bin" ]]; then
                export FATPACK_REAL_LD="$cand"
                break
            fi
        done < <(type -aP ld)
        if [[ -z "${FATPACK_REAL_LD:-}" ]]; then
            echo "fatpack setup hook: no ld on PATH" >&2
            return 1
        fi
    fi

    local dir
    if [[ -n "${NIX_BUILD_TOP:-}" ]]; then
        dir="$NIX_BUILD_TOP/fatpack-wrap"
    else
        dir="$(mktemp -d "${TMPDIR:-/tmp}/fatpack-wrap.XXXXXX")" || return 1
    fi
    mkdir -p "$dir" || return 1
    local name
    for name in ld ld.bfd ld.gold ld.lld ld.mold; do
        ln -sfn "$bin" "$dir/$name" || return 1
    done

    NIX_CFLAGS_COMPILE_BEFORE="-B$dir${NIX_CFLAGS_COMPILE_BEFORE:+ $NIX_CFLAGS_COMPILE_BEFORE}"
    export NIX_CFLAGS_COMPILE_BEFORE

    # fatpackFlags: a bash array (__structuredAttrs) or a space-separated string.
    local -a flags=()
    if [[ "$(declare -p fatpackFlags 2>/dev/null)" == "declare -a"* ]]; then
        flags=("${fatpackFlags[@]}")
    elif [[ -n "${fatpackFlags:-}" ]]; then
        read -r -a flags <<<"$fatpackFlags"
    fi
    local f
    for f in "${flags[@]}"; do
        NIX_CFLAGS_LINK="${NIX_CFLAGS_LINK:+$NIX_CFLAGS_LINK }-Wl,$f"
    done
    if [[ -n "${NIX_CFLAGS_LINK+set}" ]]; then
        export NIX_CFLAGS_LINK
    fi

    # What fatpack asks the real linker about itself (the bintools wrapper's answer depends on
    # its environment, the same for every link of the build) is kept in a folder of the build:
    # asked once, not on every link (a Nix build's home is not writable). Kept if set.
    if [[ -n "${NIX_BUILD_TOP:-}" && -z "${FATPACK_CACHE_DIR+set}" ]]; then
        export FATPACK_CACHE_DIR="$NIX_BUILD_TOP/fatpack-cache"
    fi

    export fatpackWrapDir="$dir"
}

if [[ -z "${fatpackHookSourced:-}" ]]; then
    fatpackHookSourced=1
    if declare -F runHook >/dev/null; then
        postHooks+=(fatpackSetupLinker)
    else
        fatpackSetupLinker
    fi
fi
