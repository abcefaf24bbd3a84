#!/usr/bin/env bash
# ON THE GPU MACHINE: where the wall time of a packed link goes, on the static cuBLAS
# program (tests/gpu/cublas). 5 interleaved rounds of plain ld and fatpack ld (warm cache):
# the g++ command's wall time against what `--fatpack-verbose` accounts for (its steps,
# the time before the first step, the cleanup after the last). Then one packed link under
# `strace -f` (execve/exit only), which times every process of the command: g++, collect2,
# fatpack, the real ld.
#   bash bench/h200/link_account.sh [FATPACK]      (default target/release/fatpack)
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
FP="$(realpath "${1:-$root/target/release/fatpack}")"
CUDA="${CUDA_HOME:-/usr/local/cuda}"
W="$(mktemp -d "${TMPDIR:-/tmp}/fatpack-account.XXXXXX")"
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/fp" && ln -s "$FP" "$W/fp/ld"
export PATH="$CUDA/bin:$PATH"
echo "$(nproc) CPUs; $(nvcc --version | tail -2 | head -1); $(ld --version | head -1)"
nvcc -O2 -std=c++17 -c "$root/tests/gpu/cublas/cublas_check.cu" -o "$W/check.o" || exit 1
LIBS=(-L"$CUDA/lib64" -lcublas_static -lcublasLt_static -lculibos -lcudart_static -lpthread -ldl -lrt)
cat "$CUDA/lib64/libcublas_static.a" "$CUDA/lib64/libcublasLt_static.a" >/dev/null
cd "$W"
wall() { # NAME CMD...: prints "NAME seconds rc", the command's stderr in NAME.err
    python3 - "$@" <<'PY'
import subprocess, sys, time
t = time.time()
r = subprocess.run(sys.argv[2:], stderr=open(sys.argv[1] + ".err", "w"))
print(f"{sys.argv[1]} {time.time() - t:.3f} {r.returncode}")
PY
}
for round in 1 2 3 4 5; do
    wall "plain.$round" g++ -o plain.bin check.o "${LIBS[@]}"
    wall "packed.$round" g++ -B"$W/fp" -Wl,--fatpack-verbose -o packed.bin check.o "${LIBS[@]}"
done >times.txt
python3 - <<'PY'
import re, statistics
rows = [l.split() for l in open("times.txt")]
plain = [float(w) for n, w, rc in rows if n.startswith("plain")]
print(f"plain ld walls: {' '.join(f'{w:.2f}' for w in plain)}  median {statistics.median(plain):.2f}")
print("| round | g++ wall s | fatpack total s | before first step s | steps s (sum) | cleanup s | unaccounted s |")
print("|---|---:|---:|---:|---:|---:|---:|")
packed = []
for n, w, rc in rows:
    if not n.startswith("packed"):
        continue
    err = open(n + ".err").read()
    total = float(re.search(r"total ([0-9.]+)s", err).group(1))
    steps = sum(float(x) for x in re.findall(r" ([0-9.]+)s", re.search(r"steps: (.*)", err).group(1)))
    m = re.search(r"before the first step ([0-9.]+)s; cleanup after the last \(temp files, mappings\) ([0-9.]+)s", err)
    before, clean = (float(m.group(1)), float(m.group(2))) if m else (0.0, 0.0)
    packed.append(float(w))
    print(f"| {n.split('.')[1]} | {float(w):.2f} | {total:.2f} | {before:.2f} | {steps:.2f} | {clean:.2f} | {float(w) - total - before - clean:.2f} |")
print(f"packed median {statistics.median(packed):.2f} s = {statistics.median(packed) / statistics.median(plain):.3f}x plain")
PY
grep -h "steps:" packed.5.err
# One more packed link with timestamps at each process boundary (no strace needed): the
# command starts, fatpack starts (a wrapper as ld that logs, then execs it), the real ld
# starts and ends (FATPACK_REAL_LD, a wrapper that logs around it), the command ends.
cat > "$W/log-fp" <<SH
#!/bin/bash
echo "fatpack-start \$(date +%s.%N)" >> "$W/timeline.txt"
exec -a "\$0" "$FP" "\$@"
SH
cat > "$W/log-ld" <<SH
#!/bin/sh
echo "ld-start \$(date +%s.%N)" >> "$W/timeline.txt"
$(command -v ld) "\$@"; rc=\$?
echo "ld-end \$(date +%s.%N)" >> "$W/timeline.txt"
exit \$rc
SH
chmod +x "$W/log-fp" "$W/log-ld"
mkdir -p "$W/fp2" && ln -s "$W/log-fp" "$W/fp2/ld"
: > timeline.txt
echo "command-start $(date +%s.%N)" >> timeline.txt
FATPACK_REAL_LD="$W/log-ld" g++ -B"$W/fp2" -Wl,--fatpack-verbose -o packed.bin check.o "${LIBS[@]}" 2> timeline.err
echo "command-end $(date +%s.%N)" >> timeline.txt
python3 - <<'PY'
t = {}
for line in open("timeline.txt"):
    k, v = line.split()
    t[k] = float(v)
z = t["command-start"]
for k in ["fatpack-start", "ld-start", "ld-end", "command-end"]:
    print(f"  {k:<14} +{t[k] - z:6.2f} s")
PY
grep -h "total\|steps:\|before the first" timeline.err | sed 's/^/  /'
