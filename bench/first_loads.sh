#!/usr/bin/env bash
# Every module's first load, no GPU needed: each packed binary run with FATPACK_EAGER=1 (every
# module loaded at start-up, as for the GPUs FAKE_CUDA_DEVICES names) against the fake
# libcuda of the tests (tests/fake/fakecuda.c), FATPACK_LOG=info giving each module's decode
# and check time. ROUNDS interleaved rounds; per module the median over rounds, then over
# modules the median, p90, max and sum (ms). For two builds of the runtime on the same store.
#   bash bench/first_loads.sh ROUNDS BINARY...        (FAKE_CUDA_DEVICES default 90)
set -euo pipefail
rounds="$1"
shift
root="$(cd "$(dirname "$0")/.." && pwd)"
W="$(mktemp -d)"
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/cuda"
cc -shared -fPIC -O1 -Wl,-soname,libcuda.so.1 -o "$W/cuda/libcuda.so.1" "$root/tests/fake/fakecuda.c"
for r in $(seq "$rounds"); do
    for b in "$@"; do
        FATPACK_EAGER=1 FATPACK_LOG=info LD_LIBRARY_PATH="$W/cuda" FAKE_CUDA_DEVICES="${FAKE_CUDA_DEVICES:-90}" \
            "$b" >/dev/null 2>"$W/log" || { echo "$b failed:"; tail -3 "$W/log"; exit 1; }
        grep "decode and check" "$W/log" >"$W/$(basename "$b").$r"
    done
done
echo "$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled)"
echo "| binary | modules | decoded MB | median ms | p90 ms | max ms | sum ms | MB/s over all |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|"
for b in "$@"; do
    python3 - "$W" "$(basename "$b")" "$rounds" <<'PY'
import re, statistics, sys
w, name, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
per, size = {}, {}
for r in range(1, rounds + 1):
    for m in re.finditer(r"module (\S+): registered .*?\((\d+) bytes decompressed\).*?decode and check ([0-9.]+)",
                         open(f"{w}/{name}.{r}").read()):
        per.setdefault(m.group(1), []).append(float(m.group(3)))
        size[m.group(1)] = int(m.group(2))
v = sorted(statistics.median(x) for x in per.values())
p90 = v[min(len(v) - 1, int(0.9 * len(v)))]
mb = sum(size.values()) / 1e6
print(f"| {name} | {len(v)} | {mb:.1f} | {statistics.median(v):.2f} | {p90:.2f} | {v[-1]:.1f} | {sum(v):.0f} | {mb / (sum(v) / 1e3):.0f} |")
PY
done
