#!/usr/bin/env python3
"""first_kernel measurements for BENCHMARKS.md (run on the GPU machine by run.sh).

    bench.py OUTDIR TABLE_FILE [RUNS]

For each row: one warm-up run, then RUNS runs; medians of
  size        the binary (plus its side file, if any)
  start->exit wall time of the process, measured here around fork/exec/wait
  main->1st   main() entry to first kernel completion, measured inside (std::chrono);
              includes creating the CUDA context (cudaMalloc)
  1st launch  the first launch alone, context already created: module load + a short kernel
  RSS         VmRSS after the first kernel
  device      cudaMemGetInfo used (total - free) after the first kernel (whole GPU)
Exit 1 if any run failed or produced a wrong result.
"""
import os
import re
import statistics
import subprocess
import sys
import time

out = sys.argv[1]
table_file = sys.argv[2]
runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5

# (label, bench variant, extra environment, arguments)
ROWS = [
    ("plain", "plain", {}, []),
    ("plain_compress_all", "plain_compress_all", {}, []),
    ("plain, nvcc --compress-mode=size", "plain_size", {}, []),
    ("packed", "packed", {}, []),
    ("packed, repack --level 19 (release)", "packed_release", {}, []),
    ("packed, repack --release (solid groups)", "packed_solid", {}, []),
    ("tail mode (no runtime)", "tail", {}, []),
    ("plain, CUDA_MODULE_LOADING=EAGER", "plain", {"CUDA_MODULE_LOADING": "EAGER"}, []),
    ("packed, FATPACK_EAGER=1 +CUDA EAGER", "packed", {"FATPACK_EAGER": "1", "CUDA_MODULE_LOADING": "EAGER"}, []),
    ("baseline: cudaFree(0) only (plain)", "plain", {}, ["--baseline"]),
]
LINE = re.compile(r"first_kernel: main_to_first_kernel_ms=([\d.]+) first_launch_ms=([\d.]+) rss_kb=(-?\d+) "
                  r"dev_used_mb=([\d.]+) dev_total_mb=([\d.]+) check=(\w+)")

ok = True
rows = []
for label, variant, extra, args in ROWS:
    exe = os.path.join(out, "bench", variant, "first_kernel")
    if not os.path.isfile(exe):
        print(f"  {label}: not built")
        ok = False
        continue
    size = os.path.getsize(exe) + (os.path.getsize(exe + ".fatpack") if os.path.exists(exe + ".fatpack") else 0)
    env = dict(os.environ)
    env.update(extra)
    samples = []
    for i in range(runs + 1):
        t0 = time.perf_counter()
        try:
            p = subprocess.run([exe] + args, capture_output=True, text=True, env=env, timeout=60)
        except subprocess.TimeoutExpired:
            print(f"  {label}: run {i} timed out")
            ok = False
            break
        wall = (time.perf_counter() - t0) * 1e3
        m = LINE.search(p.stdout)
        if p.returncode != 0 or not m or m.group(6) != "PASS":
            print(f"  {label}: run {i} failed (rc={p.returncode}): {(p.stdout + p.stderr).strip()[-400:]}")
            ok = False
            break
        if i == 0:
            continue  # warm-up: page cache, driver state
        samples.append((wall, float(m.group(1)), float(m.group(2)), int(m.group(3)) / 1024.0, float(m.group(4))))
    if len(samples) != runs:
        rows.append((label, size, None))
        continue
    med = [statistics.median(s[k] for s in samples) for k in range(5)]
    spread = [max(s[k] for s in samples) - min(s[k] for s in samples) for k in range(3)]
    rows.append((label, size, med, spread))
    print(f"  {label}: {size / 1e6:.2f} MB, start->exit {med[0]:.1f} ms, main->first kernel {med[1]:.1f} ms, "
          f"first launch {med[2]:.2f} ms, RSS {med[3]:.1f} MB, device {med[4]:.1f} MB")

lines = [f"first_kernel (one heavy kernel of many, launched once), median of {runs} runs after 1 warm-up:",
         f"{'variant':<38} {'file MB':>8} {'start->exit ms':>15} {'main->1st kernel ms':>20} {'1st launch ms':>14}"
         f" {'RSS MB':>7} {'device MB':>10}"]
for r in rows:
    if r[2] is None:
        lines.append(f"{r[0]:<38} {r[1] / 1e6:>8.2f} {'FAILED':>15}")
    else:
        label, size, med, spread = r
        lines.append(f"{label:<38} {size / 1e6:>8.2f} {med[0]:>9.1f} ±{spread[0] / 2:<4.0f} {med[1]:>14.1f} ±{spread[1] / 2:<4.0f}"
                     f" {med[2]:>8.2f} ±{spread[2] / 2:<4.1f} {med[3]:>7.1f} {med[4]:>10.1f}")
lines.append("± = half the max-min spread. main->1st kernel includes creating the context; with FATPACK_EAGER=1")
lines.append("the modules (and the driver) are set up before main(), so compare start->exit there.")
lines.append("1st launch = first kernel launch + sync after the context exists (module load + short kernel).")
lines.append("device MB = cudaMemGetInfo total-free after the first kernel (whole GPU).")
text = "\n".join(lines)
print()
print(text)
with open(table_file, "w") as f:
    f.write(text + "\n")
sys.exit(0 if ok else 1)
