#!/usr/bin/env bash
# Small links where the real linker is a shell wrapper, as in a Nix build (nixpkgs' bintools
# wrapper: bash that reads its flag files, adds -L for every input of the build from
# NIX_LDFLAGS, and looks through each of those folders for the libraries it links, for the
# rpath). A stand-in does the same work: it sources a helper of 200 shell functions, takes
# NIX_LDFLAGS (-L to 30 folders of 20 files each), and for each -L folder runs `realpath` and
# lists the folder, then runs ld with its flags around the arguments.
# N links (default 50) of bench/small/hello.c, ROUNDS rounds (default 5), alternating link by
# link: plain gcc with the wrapper as its ld, and gcc -B<fatpack> with FATPACK_REAL_LD=the
# wrapper (what the Nix setup hook sets up), with the defaults cache in a folder of the build
# (as the hook sets it) and with none (a Nix build's home is not writable). Prints each
# round's seconds and ratio and the medians, and checks the outputs are the same bytes.
#   [FATPACK=path] bash bench/wrapped_small_links.sh [N] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-50} rounds=${2:-5}
[ -x target/release/fatpack ] || bash scripts/build.sh
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
mkdir -p "$w/plain" "$w/fp" "$w/support"
ln -s "${FATPACK:-$PWD/target/release/fatpack}" "$w/fp/ld"
flags=""
for i in $(seq 30); do
    mkdir -p "$w/deps/d$i/lib"
    for j in $(seq 20); do : >"$w/deps/d$i/lib/libdep${i}_$j.so.1"; done
    flags+=" -L$w/deps/d$i/lib"
done
export NIX_LDFLAGS="$flags"
for i in $(seq 200); do printf 'f%d() { local x="$1"; case "$x" in -L*) echo "${x:2}" ;; esac; }\n' "$i"; done >"$w/support/utils.bash"
cat >"$w/plain/ld" <<EOF
#!/usr/bin/env bash
set -eu -o pipefail
source "$w/support/utils.bash"
params=("\$@")
extraAfter=(\$NIX_LDFLAGS)
declare -a libDirs
for p in "\${params[@]}" "\${extraAfter[@]}"; do
    case "\$p" in -L/*) libDirs+=("\${p:2}") ;; esac
done
for dir in "\${libDirs[@]}"; do
    dir=\$(realpath -s "\$dir") || continue
    for path in "\$dir"/*; do :; done
done
exec $(command -v ld) "\${params[@]}" "\${extraAfter[@]}"
EOF
chmod +x "$w/plain/ld"
export FATPACK_REAL_LD="$w/plain/ld"
gcc -O2 -c bench/small/hello.c -o "$w/hello.o"
gcc -B"$w/plain" -o "$w/a" "$w/hello.o"
FATPACK_CACHE_DIR="$w/cache" gcc -B"$w/fp" -o "$w/b" "$w/hello.o"
cmp "$w/a" "$w/b" && echo "output: the wrapped linker's, byte for byte ($(stat -c %s "$w/b") bytes)"
echo "machine: $(nproc) CPUs, $(ld --version | head -1), $(gcc --version | head -1)"
t() { # command...: prints its seconds
    local t0=$EPOCHREALTIME
    "$@"
    awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.6f", b - a }'
}
for mode in build-cache no-cache; do
    case $mode in
    build-cache) export FATPACK_CACHE_DIR="$w/cache" ;;
    no-cache) export FATPACK_CACHE_DIR= ;;
    esac
    ratios=""
    for r in $(seq "$rounds"); do
        p=0 f=0
        for _ in $(seq "$n"); do
            p=$(awk -v s="$p" -v d="$(t gcc -B"$w/plain" -o "$w/a" "$w/hello.o")" 'BEGIN { printf "%.6f", s + d }')
            f=$(awk -v s="$f" -v d="$(t gcc -B"$w/fp" -o "$w/b" "$w/hello.o")" 'BEGIN { printf "%.6f", s + d }')
        done
        ratio=$(awk -v a="$f" -v b="$p" 'BEGIN { printf "%.3f", a / b }')
        ratios+="$ratio "
        printf '%-11s round %d: %3d links  wrapped ld %6.3f s  fatpack %6.3f s  ratio %s\n' "$mode" "$r" "$n" "$p" "$f" "$ratio"
    done
    median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
    echo "$mode: median ratio $(median "$ratios") of $rounds rounds"
done
