#!/usr/bin/env bash
# ON THE GPU MACHINE: two fatpack builds' runtimes side by side on the static cuBLAS program
# (tests/gpu/cublas): each links the program, the link's output is repacked into release
# stores (--release --group-mib 16 and 32, by OLD's fatpack for both: the store does not
# depend on the runtime), and every binary runs in 7 interleaved rounds with FATPACK_LOG=info:
# results, wall time, peak RSS, and each module's first load (decode and check), per module
# the median over rounds. Also: this host's transparent huge page setting.
#   bash bench/h200/runtime_ab.sh OLD_FATPACK NEW_FATPACK
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OLD="$(realpath "$1")"
NEW="$(realpath "$2")"
CUDA="${CUDA_HOME:-/usr/local/cuda}"
W="$(mktemp -d "${TMPDIR:-/tmp}/fatpack-ab.XXXXXX")"
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/old" "$W/new" && ln -s "$OLD" "$W/old/ld" && ln -s "$NEW" "$W/new/ld"
export PATH="$CUDA/bin:$PATH"
echo "$(nproc) CPUs; THP enabled: $(cat /sys/kernel/mm/transparent_hugepage/enabled), defrag: $(cat /sys/kernel/mm/transparent_hugepage/defrag)"
echo "OLD $("$OLD" --version | head -1); NEW $("$NEW" --version | head -1)"
nvcc -O2 -std=c++17 -c "$root/tests/gpu/cublas/cublas_check.cu" -o "$W/check.o" || exit 1
LIBS=(-L"$CUDA/lib64" -lcublas_static -lcublasLt_static -lculibos -lcudart_static -lpthread -ldl -lrt)
cat "$CUDA/lib64/libcublas_static.a" "$CUDA/lib64/libcublasLt_static.a" >/dev/null
cd "$W"
g++ -o plain check.o "${LIBS[@]}" || exit 1
forms=()
for v in old new; do
    g++ -B"$W/$v" -o "packed_$v" check.o "${LIBS[@]}" || exit 1
    forms+=("packed_$v")
done
for g in 16 32; do
    "$OLD" repack packed_old -o "release${g}_old" --release --group-mib "$g" || exit 1
    # The same store under the new runtime: repack writes the store again, the host part
    # (runtime included) is the input's.
    "$OLD" repack packed_new -o "release${g}_new" --release --group-mib "$g" || exit 1
    cmp <("$OLD" inspect --json "release${g}_old" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["packed"]["store_size"])') \
        <("$OLD" inspect --json "release${g}_new" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["packed"]["store_size"])') \
        || echo "stores differ in size"
    forms+=("release${g}_old" "release${g}_new")
done
for round in 1 2 3 4 5 6 7; do
    for name in plain "${forms[@]}"; do
        FATPACK_LOG=info python3 - "$name" "./$name" >>"$name.runs" <<'PY'
import subprocess, sys, time
t = time.time()
r = subprocess.run([sys.argv[2]], capture_output=True, text=True, timeout=300)
print(r.stdout + r.stderr + f"\nwall_s={time.time() - t:.3f}\nrc={r.returncode}\n@@")
PY
    done
done
echo
echo "| binary | results | wall s (median of 7) | vs plain | peak RSS MB | modules | first load ms: median / max / sum (per module, median of 7) |"
echo "|---|---|---:|---:|---:|---:|---|"
for name in plain "${forms[@]}"; do
    python3 - "$name" "$name.runs" "plain.runs" <<'PY'
import re, statistics, sys
name, runs, base = sys.argv[1], open(sys.argv[2]).read(), open(sys.argv[3]).read()
def med(text, k, scale=1.0):
    v = [float(x) for x in re.findall(rf"\b{k}=([0-9.]+)", text)]
    return statistics.median(v) * scale if v else float("nan")
ok = runs.count("cublas_check: PASS")
w, bw = med(runs, "wall_s"), med(base, "wall_s")
per = {}
for run in runs.split("@@"):
    for m in re.finditer(r"module (\S+): registered .*?decode and check ([0-9.]+)", run):
        per.setdefault(m.group(1), []).append(float(m.group(2)))
v = sorted(statistics.median(x) for x in per.values())
loads = f"{statistics.median(v):.1f} / {v[-1]:.1f} / {sum(v):.1f}" if v else "-"
print(f"| {name} | {ok}/7 PASS | {w:.3f} | {w / bw:.3f} | {med(runs, 'hwm_kb', 1 / 1024):.1f} | {len(v)} | {loads} |")
PY
done
