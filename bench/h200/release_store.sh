#!/usr/bin/env bash
# ON THE GPU MACHINE: release stores (`fatpack repack --release`, solid groups) against the
# plain build and the default store, on the static cuBLAS program (tests/gpu/cublas):
# store size, repack time, what a GPU of this capability needs after `fatpack split`, and
# per binary (5 interleaved rounds): results, whole-program wall time, first SGEMM, host RSS
# and peak RSS; then, from FATPACK_LOG=info, what each module's first load cost (decode and
# check) in every store form, as a distribution.
#   bash bench/h200/release_store.sh [FATPACK]      (default target/release/fatpack)
#   FORMS="release8 release32" ...   only these of the repacked forms
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
FP="$(realpath "${1:-$root/target/release/fatpack}")"
CUDA="${CUDA_HOME:-/usr/local/cuda}"
W="$(mktemp -d "${TMPDIR:-/tmp}/fatpack-release.XXXXXX")"
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/fp" && ln -s "$FP" "$W/fp/ld"
export PATH="$CUDA/bin:$PATH"
cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1)"
echo "$(nproc) CPUs; $(nvcc --version | tail -2 | head -1); GPU compute capability $cap"
nvcc -O2 -std=c++17 -c "$root/tests/gpu/cublas/cublas_check.cu" -o "$W/check.o" || exit 1
LIBS=(-L"$CUDA/lib64" -lcublas_static -lcublasLt_static -lculibos -lcudart_static -lpthread -ldl -lrt)
cat "$CUDA/lib64/libcublas_static.a" "$CUDA/lib64/libcublasLt_static.a" >/dev/null
cd "$W"
secs() { # CMD...: wall seconds of CMD
    python3 - "$@" <<'PY'
import subprocess, sys, time
t = time.time()
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=open("cmd.err", "w"))
print(f"{time.time() - t:.1f}" if r.returncode == 0 else f"failed({r.returncode})")
PY
}
store_mb() { "$FP" inspect --json "$1" | python3 -c 'import json,sys; j=json.load(sys.stdin)[0]; print("%.1f" % (j["packed"]["store_size"]/1e6))'; }
g++ -o plain check.o "${LIBS[@]}" || exit 1
g++ -B"$W/fp" -o packed check.o "${LIBS[@]}" || exit 1
echo
echo "| binary | command | command s | store MB | file MB | a $cap GPU's split: host + packs MB |"
echo "|---|---|---:|---:|---:|---:|"
printf '| plain | g++ | - | - | %.1f | - |\n' "$(stat -c %s plain)e-6"
forms="packed"
declare -A args=([packed]="" [level19]="--level 19" [release4]="--release --group-mib 4" [release8]="--release --group-mib 8" [release16]="--release --group-mib 16" [release32]="--release --group-mib 32" [release8_arch]="--release --group-mib 8 --group-by arch")
declare -A took=([packed]="-")
for name in ${FORMS:-level19 release4 release8 release16 release32 release8_arch}; do
    # shellcheck disable=SC2086
    took[$name]=$(secs "$FP" repack packed -o "$name" ${args[$name]})
    [ -x "$name" ] && forms="$forms $name"
done
for name in $forms; do
    rm -rf "split_$name"
    "$FP" split "$name" --into "split_$name" >"split_$name.txt" 2>&1
    need="$(sed -n "s/^fatpack split: a GPU of compute capability $cap loads from //p" "split_$name.txt")"
    total=$(stat -c %s "split_$name/$name")
    for p in ${need//,/ }; do total=$((total + $(stat -c %s "split_$name/$p"))); done
    cmd="fatpack repack ${args[$name]}"
    [ "$name" = packed ] && cmd="fatpack ld (default)"
    printf '| %s | %s | %s | %s | %.1f | %.1f (%s) |\n' "$name" "$cmd" "${took[$name]}" "$(store_mb "$name")" \
        "$(stat -c %s "$name")e-6" "${total}e-6" "${need:-?}"
done
echo
# 5 interleaved rounds; every binary's output kept.
for round in 1 2 3 4 5; do
    for name in plain $forms; do
        python3 - "$name" "./$name" >>"$name.runs" <<'PY'
import subprocess, sys, time
t = time.time()
r = subprocess.run([sys.argv[2]], capture_output=True, text=True, timeout=300)
print(r.stdout + r.stderr + f"\nwall_s={time.time() - t:.3f}\nrc={r.returncode}")
PY
    done
done
echo "| binary | results | wall s (median of 5) | vs plain | 1st SGEMM ms | RSS MB | peak RSS MB | vs plain |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for name in plain $forms; do
    python3 - "$name" "$name.runs" "plain.runs" <<'PY'
import re, statistics, sys
name, runs, base = sys.argv[1], open(sys.argv[2]).read(), open(sys.argv[3]).read()
def med(text, k, scale=1.0):
    v = [float(x) for x in re.findall(rf"\b{k}=([0-9.]+)", text)]
    return statistics.median(v) * scale if v else float("nan")
ok = runs.count("cublas_check: PASS")
w, bw = med(runs, "wall_s"), med(base, "wall_s")
h, bh = med(runs, "hwm_kb", 1 / 1024), med(base, "hwm_kb", 1 / 1024)
print(f"| {name} | {ok}/5 PASS | {w:.3f} | {w / bw:.3f} | {med(runs, 'first_sgemm_ms'):.1f} | "
      f"{med(runs, 'rss_kb', 1 / 1024):.1f} | {h:.1f} | {h / bh:.3f} |")
PY
done
echo
echo "First load of each module (FATPACK_LOG=info, one run each): decode and check, ms"
echo "| binary | modules | median | p90 | max | sum |"
echo "|---|---:|---:|---:|---:|---:|"
for name in $forms; do
    FATPACK_LOG=info "./$name" >/dev/null 2>"$name.log"
    python3 - "$name" "$name.log" <<'PY'
import re, statistics, sys
v = sorted(float(x) for x in re.findall(r"decode and check ([0-9.]+)", open(sys.argv[2]).read()))
if not v:
    print(f"| {sys.argv[1]} | 0 | - | - | - | - |")
else:
    p90 = v[min(len(v) - 1, int(0.9 * len(v)))]
    print(f"| {sys.argv[1]} | {len(v)} | {statistics.median(v):.2f} | {p90:.2f} | {v[-1]:.2f} | {sum(v):.1f} |")
PY
done
for name in plain $forms; do
    grep -h "FAIL\|error" "$name.runs" | sort | uniq -c | head -3 | sed "s/^/  $name: /"
done
