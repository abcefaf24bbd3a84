#!/usr/bin/env bash
# ON THE GPU MACHINE: what the real linker spends on writing device code. The two programs of
# issue 24 (bench/h200/programs.sh), 3 interleaved rounds each, warm page cache:
#   plain   - g++/nvcc with the system ld;
#   tail    - plus fatpack's tail script (linker-scripts/fatbin-tail.ld): the fatbin sections last;
#   noload  - the tail script with both fatbin sections NOLOAD: addresses given, no bytes written;
#   map     - noload plus -Map (what a route that reads the map to pair containers would pay).
# Prints walls, medians, output and map sizes.
#   bash bench/h200/noload_probe.sh
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
W="$(mktemp -d "${TMPDIR:-/tmp}/fatpack-noload.XXXXXX")"
trap 'rm -rf "$W"' EXIT
sed 's/^  \.nv_fatbin :/  .nv_fatbin (NOLOAD) :/; s/^  __nv_relfatbin :/  __nv_relfatbin (NOLOAD) :/' \
    "$root/linker-scripts/fatbin-tail.ld" >"$W/noload.ld"
grep -c NOLOAD "$W/noload.ld" | grep -qx 2 || { echo "noload script not made"; exit 1; }
cp "$root/linker-scripts/fatbin-tail.ld" "$W/tail.ld"
source "$root/bench/h200/programs.sh"
link() {
    local prog=$1 who=$2 out="$2.$1.bin" x=()
    case $who in
    tail) x=(-T "$W/tail.ld") ;;
    noload) x=(-T "$W/noload.ld") ;;
    map) x=(-T "$W/noload.ld" -Map "$W/$prog.map") ;;
    esac
    local gx=() nx=()
    for a in "${x[@]}"; do gx+=("-Wl,$a"); nx+=(-Xlinker "$a"); done
    case $prog in
    cublas) g++ -o "$out" check.o "${CUBLAS[@]}" "${gx[@]}" ;;
    five) nvcc -rdc=true -arch=sm_90 -o "$out" five.o "${FIVE[@]}" "${nx[@]}" ;;
    esac
}
rounds 3 plain tail noload map
for prog in cublas five; do
    for who in plain tail noload map; do
        echo "$prog $who: $(stat -c %s "$who.$prog.bin") bytes; rc of the last round $(awk -v n="$prog.$who.3" '$1 == n { print $3 }' times.txt)"
    done
    echo "$prog map: $(stat -c %s "$prog.map") bytes, $(grep -c '^ \.nv_fatbin' "$prog.map") .nv_fatbin input sections listed"
    readelf -lW "noload.$prog.bin" | grep -A1 "LOAD" | tail -4
    readelf -SW "noload.$prog.bin" | grep -E "nv_fatbin|nvFatBin|relfatbin"
done
./noload.cublas.bin >/dev/null 2>&1; echo "noload cublas program runs? rc $? (expected to fail: its device code was never written)"
