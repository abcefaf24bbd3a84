#!/usr/bin/env bash
# What the runtime adds to an output: the fixture program (tests/fixtures/nvcc13, 3 modules,
# 12 entries) linked by g++ with static cudart, plain and through `fatpack ld`. Prints both
# file sizes, the store, the net growth, and the runtime's own bytes in the output (its input
# sections, from the link map).
#   bash bench/runtime_size.sh [FATPACK]      (default target/release/fatpack)
set -euo pipefail
# Its programs hold less device code than `fatpack ld` packs by default (512 KiB,
# src/link/worth_packing.rs): ask for packing, as for any small program.
export FATPACK_MODE=packed
cd "$(dirname "$0")/.."
source scripts/cuda-env.sh
FP="$(realpath "${1:-target/release/fatpack}")"
W="$(mktemp -d)"
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/fp"
ln -s "$FP" "$W/fp/ld"
objs=(tests/fixtures/nvcc13/main.o tests/fixtures/nvcc13/kernels.o tests/fixtures/nvcc13/other.o)
libs=(-L"$CUDA_HOME/lib" -lcudart_static -ldl -lrt -lpthread)
g++ -o "$W/plain" "${objs[@]}" "${libs[@]}"
g++ -B"$W/fp" -o "$W/packed" "${objs[@]}" "${libs[@]}" -Wl,-Map="$W/packed.map"
python3 - "$W" <<'PY'
import os, re, subprocess, sys
w = sys.argv[1]
size = lambda p: os.path.getsize(os.path.join(w, p))
secs = subprocess.run(["readelf", "-SW", os.path.join(w, "packed")], capture_output=True, text=True).stdout
store = next(int(l.split()[5], 16) for l in secs.replace("[ ", "[").splitlines() if " .fatpack " in l)
m = open(os.path.join(w, "packed.map")).read()
m = m[m.index("Linker script and memory map"):]
own, cur = 0, None
for l in m.splitlines():
    h = re.match(r"^ (\.\S+)\s*$", l)
    if h:
        cur = h.group(1)
        continue
    e = re.match(r"^ (\.\S+)?\s+0x[0-9a-f]+\s+0x([0-9a-f]+)\s+(\S+)", l)
    if e:
        sec, cur = e.group(1) or cur, None
        if sec and "libfatpack_rt" in e.group(3) and not sec.startswith((".llvm", ".comment", ".note", ".group")):
            own += int(e.group(2), 16)
print(f"plain {size('plain')}  packed {size('packed')}  store {store}")
print(f"packed - plain: {size('packed') - size('plain')} bytes")
print(f"the runtime's own sections in the output: {own} bytes")
PY
