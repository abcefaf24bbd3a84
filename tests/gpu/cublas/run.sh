#!/usr/bin/env bash
# ON THE GPU MACHINE: a program linked against the CUDA toolkit's static cuBLAS
# (/usr/local/cuda/lib64/libcublas_static.a + libcublasLt_static.a), plain and through
# `fatpack ld`, then the packed one pruned for this GPU (`fatpack prune --for`): link time
# and peak memory, file size and disk use, and for each binary the checked results, host RSS,
# first cuBLAS call and SGEMM throughput (median of 3 runs). Prints a table.
#
#   bash tests/gpu/cublas/run.sh [FATPACK]     (default target/release/fatpack)
set -u
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FP="$(realpath "${1:-target/release/fatpack}")"
CUDA="${CUDA_HOME:-/usr/local/cuda}"
W="$(mktemp -d "${TMPDIR:-/tmp}/fatpack-cublas.XXXXXX")"
mkdir -p "$W/fp"
ln -s "$FP" "$W/fp/ld"
export PATH="$CUDA/bin:$PATH"
cap="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1)"
echo "cublas: $(nvcc --version | tail -2 | head -1); GPU compute capability $cap; $(nproc) CPUs"
ls -l "$CUDA/lib64/libcublas_static.a" "$CUDA/lib64/libcublasLt_static.a" | awk '{print "  " $5, $9}'

# measure NAME CMD...: wall seconds and peak RSS (MB) of CMD and its children -> $W/NAME.time
measure() {
    local name="$1"
    shift
    python3 - "$W/$name.time" "$@" <<'PY'
import resource, subprocess, sys, time
t = time.time()
r = subprocess.run(sys.argv[2:])
wall = time.time() - t
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
open(sys.argv[1], "w").write(f"{wall:.2f} {peak:.0f} {r.returncode}\n")
sys.exit(r.returncode)
PY
}

nvcc -O2 -std=c++17 -c "$here/cublas_check.cu" -o "$W/check.o" || exit 1
LIBS=(-L"$CUDA/lib64" -lcublas_static -lcublasLt_static -lculibos -lcudart_static -lpthread -ldl -lrt)
# Both links read the archives from a warm page cache: the first link of a fresh machine
# reads 950 MB from disk, which made earlier runs favour whichever link came second.
cat "$CUDA/lib64/libcublas_static.a" "$CUDA/lib64/libcublasLt_static.a" >/dev/null
measure link_plain g++ -o "$W/plain" "$W/check.o" "${LIBS[@]}" || { echo "plain link failed"; exit 1; }
measure link_packed g++ -B"$W/fp" -Wl,--fatpack-verbose -o "$W/packed" "$W/check.o" "${LIBS[@]}" || { echo "packed link failed"; exit 1; }
measure link_tail g++ -B"$W/fp" -Wl,--fatpack-mode=tail -o "$W/tail" "$W/check.o" "${LIBS[@]}" || echo "tail link failed"
measure prune "$FP" prune --for "$cap" "$W/packed" -o "$W/pruned" > "$W/prune.txt" 2>&1 || { cat "$W/prune.txt"; echo "prune failed"; }
tail -n 4 "$W/prune.txt" | sed 's/^/  prune packed: /'
measure prune_tail "$FP" prune --for "$cap" "$W/tail" -o "$W/tail_pruned" > "$W/prune_tail.txt" 2>&1 || { cat "$W/prune_tail.txt"; echo "prune of tail failed"; }
tail -n 4 "$W/prune_tail.txt" | sed 's/^/  prune tail: /'
# Split the packed build and keep only the packs a GPU of this capability loads from (as
# `fatpack split` reports them): what a per-capability package would ship.
measure split "$FP" split "$W/packed" --into "$W/split" > "$W/split.txt" 2>&1 || { cat "$W/split.txt"; echo "split failed"; }
sed 's/^/  /' "$W/split.txt" | grep -v "\.fatpack: sm_\|capability [0-9.]* loads" | head -4
need="$(sed -n "s/^fatpack split: a GPU of compute capability $cap loads from //p" "$W/split.txt")"
echo "  a $cap GPU needs: ${need:-?}"
mkdir -p "$W/split_$cap"
cp "$W/split/packed" "$W/split_$cap/" 2>/dev/null
for p in ${need//,/ }; do cp "$W/split/$p" "$W/split_$cap/"; done
measure join "$FP" join "$W/split/packed" -o "$W/joined" > "$W/join.txt" 2>&1 || cat "$W/join.txt"
# A release build: the packed binary's store compressed again at level 19, no relink.
measure repack "$FP" repack "$W/packed" -o "$W/repacked" --level 19 > "$W/repack.txt" 2>&1 || cat "$W/repack.txt"
sed 's/^/  /' "$W/repack.txt"
cmp -s "$W/packed" "$W/joined" && echo "  join: identical to the packed binary" || echo "  join: DIFFERS from the packed binary"

row() { # NAME FILE
    local name="$1" f="$2" i
    [ -x "$f" ] || { printf '%-11s missing\n' "$name"; return; }
    : >"$W/$name.runs"
    for i in 1 2 3; do
        timeout 300 "$f" >"$W/$name.out.$i" 2>&1
        echo "rc=$?" >>"$W/$name.out.$i"
        cat "$W/$name.out.$i" >>"$W/$name.runs"
    done
    python3 - "$name" "$f" "$W/$name.runs" <<'PY'
import os, re, statistics, sys
name, f, runs = sys.argv[1], sys.argv[2], open(sys.argv[3]).read()
def vals(k):
    return [float(x) for x in re.findall(rf"^{k}=([0-9.]+)", runs, re.M)]
def med(k, scale=1.0):
    v = vals(k)
    return f"{statistics.median(v) * scale:.1f}" if v else "-"
ok = runs.count("cublas_check: PASS")
st = os.stat(f)
print(f"{name:<11} {st.st_size/1e6:>9.1f} {st.st_blocks*512/1e6:>8.1f} {ok}/3 PASS "
      f"{med('first_sgemm_ms'):>10} {med('rss_kb', 1/1024):>8} "
      f"{med('hwm_kb', 1/1024):>8} {med('sgemm4096_tflops'):>8}")
if ok < 3:
    print("  first run's output:\n    " + "\n    ".join(runs.splitlines()[:25]))
PY
}
echo
echo "binary        file MB    du MB  results  1st SGEMM ms  RSS MB  peak MB  TFLOP/s (median of 3)"
row plain "$W/plain"
row packed "$W/packed"
row pruned "$W/pruned"
row tail "$W/tail"
row tail_pruned "$W/tail_pruned"
row split_$cap "$W/split_$cap/packed"
row repacked "$W/repacked"
echo
# xz -9 of what each would ship (64 MiB blocks so 16 threads share the work; all at once).
if command -v xz >/dev/null; then
    tar -C "$W/split_$cap" -cf "$W/split_$cap.tar" .
    for n in plain packed pruned tail tail_pruned split_$cap.tar repacked; do
        [ -f "$W/$n" ] && (xz -9 -T16 --block-size=64MiB -c "$W/$n" | wc -c >"$W/$n.xz_size") &
    done
    wait
    echo "xz -9 (64 MiB blocks), MB:"
    for n in plain packed pruned tail tail_pruned split_$cap.tar repacked; do
        [ -f "$W/$n.xz_size" ] && printf '  %-16s %8.1f -> %7.1f\n' "$n" "$(stat -c %s "$W/$n")e-6" "$(cat "$W/$n.xz_size")e-6"
    done
fi
for t in link_plain link_packed link_tail prune prune_tail split join repack; do
    [ -f "$W/$t.time" ] || { echo "$t: not run"; continue; }
    read -r wall peak rc <"$W/$t.time"
    printf '%-12s %6.2f s  peak %6d MB  rc %s\n' "$t" "$wall" "$peak" "$rc"
done
grep -m3 "packed\|store mapped" "$W/link_packed.log" 2>/dev/null
for n in plain packed pruned tail tail_pruned; do
    grep -h "error\|FAIL\|fatpack:" "$W/$n.runs" 2>/dev/null | sort | uniq -c | head -5 | sed "s/^/  $n: /"
done
