#!/usr/bin/env bash
# The fixture program (3 modules) linked by g++ with static cudart, plain and through
# fatpack ld: median wall ms of RUNS links each (after one warm-up), and output bytes.
#   bash bench/small_link.sh [RUNS=15]
set -euo pipefail
# Its programs hold less device code than `fatpack ld` packs by default (512 KiB,
# src/link/worth_packing.rs): ask for packing, as for any small program.
export FATPACK_MODE=packed
root="$(cd "$(dirname "$0")/.." && pwd)"
source "$root/scripts/cuda-env.sh"
cd "$root"
cargo build --release --locked -q -p fatpack
d="$(mktemp -d)"
trap 'rm -rf "$d"' EXIT
mkdir -p "$d/wrap" && ln -s "$root/target/release/fatpack" "$d/wrap/ld"
python3 - "$d" "${1:-15}" "$CUDA_HOME/lib" <<'PY'
import os, statistics, subprocess, sys, time
d, runs, cuda = sys.argv[1], int(sys.argv[2]), sys.argv[3]
objs = [f"tests/fixtures/nvcc13/{n}.o" for n in ("main", "kernels", "other")]
libs = [f"-L{cuda}", "-lcudart_static", "-ldl", "-lpthread", "-lrt"]
ms = {"plain": [], "packed": []}
for i in range(runs + 1):
    for name, pre in (("plain", []), ("packed", [f"-B{d}/wrap"])):
        t = time.perf_counter()
        subprocess.run(["g++", *pre, "-o", f"{d}/{name}", *objs, *libs], check=True)
        if i:
            ms[name].append((time.perf_counter() - t) * 1e3)
plain = statistics.median(ms["plain"])
for name, v in ms.items():
    m = statistics.median(v)
    print(f"{name}: median {m:.1f} ms ({m / plain:.2f}x), {os.path.getsize(f'{d}/{name}'):,} bytes")
PY
