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
    local name=$1; shift
    local s e rc
    s=$(date +%s.%N); "$@" 2>"$name.err"; rc=$?; e=$(date +%s.%N)
    echo "$name $(echo "$e - $s" | bc) $rc"
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
if command -v strace >/dev/null; then
    strace -f -ttt -e trace=execve,exit_group,wait4 -o trace.txt \
        g++ -B"$W/fp" -Wl,--fatpack-verbose -o packed.bin check.o "${LIBS[@]}" 2>/dev/null
    python3 - <<'PY'
import re
start, end, name = {}, {}, {}
for line in open("trace.txt"):
    m = re.match(r"(\d+) +([0-9.]+) (.*)", line)
    if not m:
        continue
    pid, t, rest = m.group(1), float(m.group(2)), m.group(3)
    if rest.startswith("execve(") and "= 0" in rest:
        start.setdefault(pid, t)
        name[pid] = rest.split('"')[1]
    elif "exit_group" in rest or "+++ exited" in rest:
        end[pid] = t
t0 = min(start.values())
for pid in sorted(start, key=start.get):
    print(f"  {name[pid]:<60} exec +{start[pid] - t0:7.3f} s, exit +{end.get(pid, float('nan')) - t0:7.3f} s")
PY
else
    echo "(no strace on this machine: no per-process timeline)"
fi
