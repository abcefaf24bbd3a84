#!/usr/bin/env bash
# ON THE GPU MACHINE: two fatpack builds side by side on the static cuBLAS program
# (tests/gpu/cublas): 5 interleaved rounds of plain ld, OLD and NEW, each link's wall time
# and peak memory (the largest process, and fatpack's own from --fatpack-verbose), the
# ELF-parse count NEW reports, whether the two packed outputs are byte-identical, and each
# binary's checked results on the GPU.
#   bash bench/h200/old_new_link.sh OLD_FATPACK NEW_FATPACK
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OLD="$(realpath "$1")"
NEW="$(realpath "$2")"
CUDA="${CUDA_HOME:-/usr/local/cuda}"
W="$(mktemp -d "${TMPDIR:-/tmp}/fatpack-oldnew.XXXXXX")"
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/old" "$W/new"
ln -s "$OLD" "$W/old/ld"
ln -s "$NEW" "$W/new/ld"
export PATH="$CUDA/bin:$PATH"
echo "$(nproc) CPUs; $(nvcc --version | tail -2 | head -1)"
nvcc -O2 -std=c++17 -c "$root/tests/gpu/cublas/cublas_check.cu" -o "$W/check.o" || exit 1
LIBS=(-L"$CUDA/lib64" -lcublas_static -lcublasLt_static -lculibos -lcudart_static -lpthread -ldl -lrt)
cat "$CUDA/lib64/libcublas_static.a" "$CUDA/lib64/libcublasLt_static.a" >/dev/null
# Peak memory is read from the command's caller (the largest process it waited for): a forked
# link's child and its real linker are not waited for by the command, so links run in one
# process here (FATPACK_FORK=no; a forked link ends sooner by the child's end, milliseconds).
export FATPACK_FORK=no
# timed NAME CMD...: "NAME wall peak_MiB rc" (peak: the largest process CMD ran).
timed() {
    python3 - "$@" <<'PY'
import resource, subprocess, sys, time
t = time.time()
r = subprocess.run(sys.argv[2:], stderr=open(sys.argv[1] + ".err", "w"))
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(f"{sys.argv[1]} {time.time() - t:.2f} {peak:.0f} {r.returncode}")
PY
}
cd "$W"
for round in 1 2 3 4 5; do
    for who in plain old new; do
        case $who in
        plain) timed "plain.$round" g++ -o plain.bin "$W/check.o" "${LIBS[@]}" ;;
        *) timed "$who.$round" g++ -B"$W/$who" -Wl,--fatpack-verbose -o "$who.bin" "$W/check.o" "${LIBS[@]}" ;;
        esac
    done
done >times.txt
python3 - <<'PY'
import re, statistics
rows = [l.split() for l in open("times.txt")]
by = {}
for name, wall, peak, rc in rows:
    who, rnd = name.split(".")
    own = "-"
    if who != "plain":
        m = re.search(r"peak RSS \(MiB\) after each step: (.*?); while", open(name + ".err").read())
        if m:
            own = max(float(x.split()[-1]) for x in m.group(1).split(", "))
    by.setdefault(who, []).append((float(wall), float(peak), own, rc))
print(f"{'link':<6} {'walls (s), 5 rounds':<36} {'median':>7} {'ratio':>6} {'peak MiB':>9} {'fatpack own MiB, 5 rounds':>26}")
base = statistics.median(w for w, *_ in by["plain"])
for who, v in by.items():
    walls = [w for w, *_ in v]
    med = statistics.median(walls)
    owns = [o for *_, o, _ in v if o != "-"]
    print(f"{who:<6} {' '.join(f'{w:.2f}' for w in walls):<36} {med:>7.2f} {med / base:>6.3f} "
          f"{max(p for _, p, *_ in v):>9.0f} {' '.join(f'{o:.0f}' for o in owns) if owns else '-':>26}"
          f"  rc {','.join(sorted(set(r for *_, r in v)))}")
PY
grep -h "ELF files read" new.5.err | sed 's/^/new: /'
for who in old new; do
    grep -h "steps:\|peak RSS" "$who.5.err" | sed "s/^/$who: /"
done
# The two embed different runtimes (each fatpack carries its own): compare the outputs less
# the runtime's bytes by linking OLD's way again with NEW's runtime archive.
rt="$W/rt.a"
cmp -s old.bin new.bin && echo "old and new packed outputs: byte-identical" ||
    echo "old and new packed outputs differ ($(stat -c %s old.bin) vs $(stat -c %s new.bin) bytes: each carries its own runtime)"
mkdir -p "$W/keep" && g++ -B"$W/new" -Wl,--fatpack-save-temps -o "$W/keep/new.bin" "$W/check.o" "${LIBS[@]}" 2>/dev/null &&
    cp "$W/keep/new.bin.fatpack-temps/libfatpack_rt.a" "$rt" 2>/dev/null &&
    FATPACK_RUNTIME="$rt" g++ -B"$W/old" -o old_rt.bin "$W/check.o" "${LIBS[@]}" &&
    FATPACK_RUNTIME="$rt" g++ -B"$W/new" -o new_rt.bin "$W/check.o" "${LIBS[@]}" &&
    { cmp -s old_rt.bin new_rt.bin && echo "with the same runtime archive: byte-identical ($(stat -c %s new_rt.bin) bytes)" ||
        echo "with the same runtime archive: DIFFER"; }
for b in plain old new; do
    out="$(timeout 300 "./$b.bin" 2>&1)"
    echo "$b: rc $? $(echo "$out" | grep -c 'cublas_check: PASS') PASS $(echo "$out" | grep -m1 'sgemm4096_tflops')"
done
