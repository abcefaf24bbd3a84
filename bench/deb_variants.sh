#!/usr/bin/env bash
# Debian's own packages of NVIDIA's libraries (bookworm non-free: libcusparse11, libcufft10,
# CUDA 11.8) pruned into per-GPU packages by the shipped command, then read back by Debian's
# tools: dpkg-deb's fields, md5sum over the extracted files, dpkg installing the fat package
# and then the variant in its place into a fresh root.
#
#   bash bench/deb_variants.sh [WORK=/tmp/fatpack-debs]
#
# apt-get downloads the packages with a private source list for non-free (the machine's own
# sources are left as they are).
set -euo pipefail
# Its programs hold less device code than `fatpack ld` packs by default (512 KiB,
# src/link/worth_packing.rs): ask for packing, as for any small program.
export FATPACK_MODE=packed
root="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-/tmp/fatpack-debs}"
cd "$root"
cargo build --release --locked -q -p fatpack
fatpack="$root/target/release/fatpack"
mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial" "$work/dl"
cat > "$work/apt/nonfree.sources" <<SRC
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: non-free
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
apt=(apt-get -q -o Dir::Etc::sourcelist=/dev/null -o "Dir::Etc::sourceparts=$work/apt"
     -o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt/cache")
"${apt[@]}" update >/dev/null
(cd "$work/dl" && "${apt[@]}" download libcusparse11 libcufft10 >/dev/null 2>&1)
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); $(date -u +%F); dpkg $(dpkg-query -W -f='${Version}' dpkg)"
echo
echo "| package | --for | MB before | MB after | ratio | Installed-Size KiB | wall s | peak MB |"
echo "|---|---|---:|---:|---:|---|---:|---:|"
for deb in "$work"/dl/*.deb; do
    for caps in 9.0 8.0; do
        out="$work/out-$caps"
        mkdir -p "$out"
        /usr/bin/time -f "time %e %M" "$fatpack" prune --for "$caps" "$deb" -o "$out" 2> "$work/log" ||
            { cat "$work/log"; exit 1; }
        variant="$(sed -n 's/^fatpack prune: wrote \(.*\)$/\1/p' "$work/log")"
        read -r _ wall kib < <(grep '^time ' "$work/log")
        a=$(stat -c %s "$deb"); b=$(stat -c %s "$variant")
        printf '| %s | %s | %.1f | %.1f | %.3f | %s -> %s | %.1f | %.0f |\n' "$(basename "$deb" | cut -d_ -f1)" "$caps" \
            "$(echo "$a/1000000" | bc -l)" "$(echo "$b/1000000" | bc -l)" "$(echo "$b/$a" | bc -l)" \
            "$(dpkg-deb --field "$deb" Installed-Size)" "$(dpkg-deb --field "$variant" Installed-Size)" \
            "$wall" "$(echo "$kib/1000" | bc -l)"
        # Extracted by dpkg-deb, every file as md5sums says; installed by dpkg after the fat one.
        x="$work/x" && rm -rf "$x" && dpkg-deb -R "$variant" "$x"
        (cd "$x" && md5sum --quiet -c DEBIAN/md5sums)
        r="$work/root" && rm -rf "$r" && mkdir -p "$r/var/lib/dpkg/info" "$r/var/lib/dpkg/updates"
        touch "$r/var/lib/dpkg/status" "$r/var/lib/dpkg/available"
        d=(dpkg "--root=$r" --force-not-root --force-script-chrootless --force-unsafe-io --force-depends)
        "${d[@]}" -i "$deb" >/dev/null 2>&1 && "${d[@]}" -i "$variant" >/dev/null 2>&1
        echo "  $(dpkg-deb --field "$variant" Package): $(dpkg-deb --field "$variant" Provides); X-Cuda-Arch $(dpkg-deb --field "$variant" X-Cuda-Arch); dpkg: $("${d[@]}" -l | awk '/^ii/ {print $2}' | tr '\n' ' ')"
    done
done
