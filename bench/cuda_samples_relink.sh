#!/usr/bin/env bash
# NVIDIA's own CMake build of its cuda-samples (the public repository: fetch it, or
# `git clone https://github.com/NVIDIA/cuda-samples`), relinked plain, under `fatpack run`
# as shipped (`--fatpack-mode=auto`), and under `FATPACK_MODE=packed fatpack run`, ROUNDS
# times each, interleaved: every link output is deleted and Ninja relinks exactly those (no
# compile). Prints the times, the outputs' total size per way, and how many outputs were
# the plain link's bytes or packed.
#   bash bench/cuda_samples_relink.sh REPO [WORK=/tmp/cuda-samples-relink] [ROUNDS=3] [DIRS=Samples/0_Introduction]
# REPO: a clone (a git directory or a work tree), or a folder holding its CMakeLists.txt,
# Common, cmake and the chosen folders (what travels to the GPU machine). Samples that need
# what the PyPI CUDA toolkit lacks (nvrtc, the driver stub libcuda.so, OpenMP) are left out
# when CMake cannot configure them; the script says which. With CUDA_HOME set to an
# installed toolkit (the GPU machine's /usr/local/cuda), that toolkit is used instead of
# the PyPI one.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
repo="$1"; work="${2:-/tmp/cuda-samples-relink}"; rounds="${3:-3}"; dirs="${4:-Samples/0_Introduction}"
if [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ]; then
    export PATH="$CUDA_HOME/bin:$PATH"
else
    source "$root/scripts/cuda-env.sh"
fi
[ -d "$root/.tools/bin" ] && export PATH="$root/.tools/bin:$PATH"
FP="$root/target/release/fatpack"
[ -x "$FP" ] || bash "$root/scripts/build.sh"
src="$work/src"; build="$work/build"
if [ ! -f "$work/built" ]; then
    # WORK is this script's own: a folder it did not make is never emptied.
    if [ -e "$work" ] && [ ! -f "$work/.cuda-samples-relink" ] && [ -n "$(ls -A "$work")" ]; then
        echo "cuda_samples_relink: $work exists and is not this script's: give another WORK" >&2
        exit 1
    fi
    rm -rf "$work" && mkdir -p "$src" && touch "$work/.cuda-samples-relink"
    # Only what the chosen folders need (a mirror may lack the repository's large files).
    if git -C "$repo" rev-parse --git-dir > /dev/null 2>&1; then
        git -C "$repo" archive HEAD CMakeLists.txt Common cmake $dirs 2> "$work/archive.log" | tar -x -C "$src"
    else
        (cd "$repo" && cp -r CMakeLists.txt Common cmake --parents $dirs "$src/")
    fi
    : > "$src/Samples/CMakeLists.txt"
    for d in $dirs; do echo "add_subdirectory(${d#Samples/})" >> "$src/Samples/CMakeLists.txt"; done
    for attempt in 1 2; do
        if cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release > "$work/configure.log" 2>&1; then break; fi
        # Leave out the samples CMake could not configure with this toolkit.
        bad=$(grep -o 'CMake Error at Samples/[^ ]*/CMakeLists.txt' "$work/configure.log" \
              | sed 's#CMake Error at Samples/\(.*\)/CMakeLists.txt#\1#' | sort -u)
        [ -n "$bad" ] && [ "$attempt" = 1 ] || { tail -20 "$work/configure.log"; exit 1; }
        echo "left out (not configurable with the PyPI toolkit): $(echo $bad | tr '\n' ' ')"
        for b in $bad; do
            sed -i "/add_subdirectory(${b##*/})/d" "$src/Samples/${b%/*}/CMakeLists.txt"
        done
        rm -rf "$build"
    done
    echo "== building once (plain), $(nproc) jobs"
    if ! cmake --build "$build" -j "$(nproc)" -- -k 0 > "$work/build.log" 2>&1; then
        # Leave out the samples that do not compile with this toolkit (a header it lacks).
        bad=$(grep '^FAILED: ' "$work/build.log" | grep -o 'Samples/[^/]*/[^/]*' | sort -u)
        [ -n "$bad" ] || { tail -30 "$work/build.log"; exit 1; }
        echo "left out (not compilable with the PyPI toolkit): $(echo ${bad//Samples\//} | tr '\n' ' ')"
        for b in ${bad//Samples\//}; do
            sed -i "/add_subdirectory(${b##*/})/d" "$src/Samples/${b%/*}/CMakeLists.txt"
        done
        cmake -S "$src" -B "$build" > "$work/configure.log" 2>&1
        cmake --build "$build" -j "$(nproc)" > "$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
    fi
    touch "$work/built"
fi
# The link outputs: executables and shared libraries the build wrote, outside CMakeFiles.
mapfile -t outs < <(find "$build" -path '*/CMakeFiles' -prune -o -type f \( -perm -u+x -o -name '*.so' \) -print | sort)
echo "${#outs[@]} link outputs; nvcc $(nvcc --version | grep -o 'release [0-9.]*'); $(nproc) CPUs"
relink() {  # relink WAY: delete every output, relink through WAY, print the seconds
    rm -f "${outs[@]}"
    local t0 t1
    t0=$(date +%s%N)
    case "$1" in
        plain) cmake --build "$build" -j "$(nproc)" > "$work/relink.log" 2>&1 ;;
        auto) env -u FATPACK_MODE "$FP" run -- cmake --build "$build" -j "$(nproc)" > "$work/relink.log" 2>&1 ;;
        packed) FATPACK_MODE=packed "$FP" run -- cmake --build "$build" -j "$(nproc)" > "$work/relink.log" 2>&1 ;;
    esac || { tail -20 "$work/relink.log"; exit 1; }
    t1=$(date +%s%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f\n", (b - a) / 1e9 }'
}
declare -A times
for r in $(seq "$rounds"); do
    for way in plain auto packed; do times[$way]+="$(relink $way) "; done
done
# The outputs of each way, kept for comparison.
for way in plain auto packed; do
    relink "$way" > /dev/null
    mkdir -p "$work/out-$way"
    for o in "${outs[@]}"; do cp "$o" "$work/out-$way/$(echo "${o#$build/}" | tr / _)"; done
done
same=0; packed=0
for f in "$work"/out-plain/*; do
    n=$(basename "$f")
    cmp -s "$f" "$work/out-auto/$n" && same=$((same + 1))
    "$FP" inspect --json "$work/out-auto/$n" 2>/dev/null \
        | python3 -c 'import json,sys; sys.exit(0 if isinstance(json.load(sys.stdin)[0].get("packed"), dict) else 1)' \
        && packed=$((packed + 1))
done
size() { du -cb "$1"/* | tail -1 | cut -f1; }
printf '%-32s %-24s %12s\n' way "relink s (each round)" "outputs B"
for way in plain auto packed; do
    printf '%-32s %-24s %12s\n' "$way" "${times[$way]}" "$(size "$work/out-$way")"
done
echo "default (auto): ${same} of ${#outs[@]} outputs are the plain link's bytes; ${packed} packed"
