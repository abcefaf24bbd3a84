#!/usr/bin/env bash
# The headline claim, reproduced: more than 2 GiB of real device code in one link.
#   bash examples/over-2gib/run.sh [TOTAL_MIB=2300] [OBJECTS=24] [WORKDIR]
# Plain ld must fail with `relocation truncated to fit`; `fatpack ld` must succeed; the
# result's store must list every entry; its host code must run. Prints timings at the end.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
total="${1:-2300}"; objects="${2:-24}"
work="${3:-$(mktemp -d)}"
source "$root/scripts/cuda-env.sh"
cd "$root"
cargo build --release --locked -q -p fatpack -p fatpack-rt
cargo build --release --locked -q --example over-2gib
mkdir -p "$work"
# Objects and one output each hold all the device code: refuse up front, naming the folder,
# rather than fail half-way through a link with a truncated message.
need_kib=$(( total * 1024 * 5 / 2 ))
free_kib=$(df -Pk "$work" | awk 'NR==2 {print $4}')
if [ "$free_kib" -lt "$need_kib" ]; then
    echo "over-2gib: $work has $((free_kib / 1024)) MiB free; this run needs about $((need_kib / 1024)) MiB" >&2
    exit 1
fi
t() { date +%s.%N; }
echo "== generating ${total} MiB over ${objects} objects in $work"
./target/release/examples/over-2gib "$work" "$total" "$objects" tests/fixtures/nvcc13/big_kernels_all.o tests/fixtures/nvcc13/kernels_all.o tests/fixtures/nvcc13/other.o
cd "$work"
ls obj*.s | xargs -P "$(nproc)" -I{} sh -c 'as -o "$(basename {} .s).o" {}'
# The objects hold the fatbins now: drop the sources so that the workdir never holds more
# than two copies of the device code (objects + one output).
rm -f obj*.s obj*.fatbin
gcc -c main.c -o main.o
objs="main.o $(ls obj*.o | sort -V | tr '\n' ' ')"
libs="-L$CUDA_HOME/lib -lcudart_static -ldl -lpthread -lrt"
du -shc obj*.o | tail -1

echo "== plain ld"
t0=$(t)
if gcc -o app_plain $objs $libs 2> plain.err; then
    echo "FAIL: plain ld linked more than 2 GiB of device code" >&2; exit 1
fi
t1=$(t)
grep -m1 'relocation truncated to fit' plain.err
echo "plain ld failed as expected ($(grep -c 'relocation truncated' plain.err) truncated relocations) in $(echo "$t1 - $t0" | bc) s"

echo "== fatpack ld"
mkdir -p wrap && ln -sf "$root/target/release/fatpack" wrap/ld
t2=$(t)
/usr/bin/time -f "fatpack ld peak RSS: %M KiB" gcc -Bwrap -Wl,--fatpack-verbose -o app_packed $objs $libs
t3=$(t)
echo "fatpack ld linked in $(echo "$t3 - $t2" | bc) s"
ls -la app_packed
"$root/target/release/fatpack" inspect --json app_packed > inspect.json
python3 - "$objects" <<'PY'
import json, sys
r = json.load(open("inspect.json"))[0]
n = sum(len(m["entries"]) for m in r["modules"])
raw = r["totals"]["raw_size"]
assert r["packed"]["digest_matches"], "digest mismatch"
mods = [m for m in r["modules"] if m["origin"].startswith("obj")]
assert len(mods) == int(sys.argv[1]), (len(mods), sys.argv[1])
print(f"store: {len(r['modules'])} modules, {n} entries, {raw/2**30:.2f} GiB raw in {r['packed']['store_size']/2**20:.1f} MiB")
assert raw > 2**31, "less than 2 GiB of device code"
PY
./app_packed
rm -f app_packed

echo "== fatpack ld --fatpack-mode=tail (no store, no runtime)"
t4=$(t)
gcc -Bwrap -Wl,--fatpack-mode=tail -o app_tail $objs $libs
t5=$(t)
echo "tail mode linked in $(echo "$t5 - $t4" | bc) s"
# .nv_fatbin starts a segment of its own, above .bss.
readelf -SW app_tail | python3 -c '
import sys
sec = {}
for line in sys.stdin:
    f = line.replace("[ ", "[").split()
    if len(f) > 5 and f[0].startswith("[") and f[0] != "[Nr]":
        sec[f[1]] = (int(f[3], 16), int(f[5], 16))
fat, bss = sec[".nv_fatbin"], sec[".bss"]
assert fat[0] >= bss[0] + bss[1], (fat, bss)
print(f".nv_fatbin at {fat[0]:#x} ({fat[1] / 2**30:.2f} GiB), after .bss at {bss[0]:#x}")
'
./app_tail
rm -f app_tail
echo "over-2gib: OK"
