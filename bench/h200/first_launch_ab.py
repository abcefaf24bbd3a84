#!/usr/bin/env python3
"""ON THE GPU MACHINE: first launches of first_kernel builds side by side (tests/gpu/bench).

    python3 bench/h200/first_launch_ab.py RUNS NAME...   (NAME/first_kernel next to this file, or
                                                        in $FIRST_KERNELS/NAME/)

RUNS runs of each after one warm-up, interleaved; the first launch (module load + a short
kernel, the context already made) as first_kernel prints it: median and quartiles, ms.
Used to try the runtime with zstd at -O2: link tests/gpu/build/bobj/std/*.o through a fatpack
built with FATPACK_RT_CFLAGS=-O2 and through the default one.
"""
import os, re, statistics, subprocess, sys
here = os.environ.get("FIRST_KERNELS", os.path.dirname(os.path.abspath(__file__)))
names = sys.argv[2:]
runs = int(sys.argv[1])
pat = re.compile(r"first_launch_ms=([\d.]+) .*check=(\w+)")
res = {n: [] for n in names}
for i in range(runs + 1):
    for n in names:
        env = dict(os.environ)
        exe = os.path.join(here, n, "first_kernel")
        p = subprocess.run([exe], capture_output=True, text=True, env=env, timeout=60)
        m = pat.search(p.stdout)
        if not m or m.group(2) != "PASS":
            print(n, "FAILED", p.stdout[-300:], p.stderr[-300:]); continue
        if i: res[n].append(float(m.group(1)))
for n in names:
    v = sorted(res[n])
    print(f"{n:12} n={len(v)} median {statistics.median(v):.2f} ms  p25 {v[len(v)//4]:.2f}  p75 {v[3*len(v)//4]:.2f}  min {v[0]:.2f} max {v[-1]:.2f}")
