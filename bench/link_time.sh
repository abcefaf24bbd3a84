#!/usr/bin/env bash
# Link time, peak RSS and output size: plain ld vs fatpack ld (packed, packed+side file,
# tail mode), on the same generated objects (examples/over-2gib's generator).
#   bash bench/link_time.sh TOTAL_MIB OBJECTS WORKDIR [SOURCE...]
# Below 2 GiB plain ld links too, so the ratio is measured directly. VARIANTS="plain packed
# side tail levelN late other" picks the links of each round (default: plain packed side tail;
# levelN: --fatpack-level=N; late: the link started after the scan, --fatpack-early-link=no;
# other: the default link by another fatpack build, OTHER=/path/to/fatpack, for a
# before/after in the same rounds); RUNS the rounds. The objects carry the
# SASS entries of SOURCE (default: the nvcc 13 fixtures), uncompressed; a real library works
# as a source, e.g. libcublasLt.so from the nvidia-cublas wheel (bench/wheels.sh installs it):
# its own cubins, each copy marked distinct so the store cannot deduplicate them.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
total="$1"; objects="$2"; work="$3"; shift 3
sources=("$@")
[ ${#sources[@]} -gt 0 ] || sources=("$root/tests/fixtures/nvcc13/big_kernels_all.o" "$root/tests/fixtures/nvcc13/kernels_all.o")
for i in "${!sources[@]}"; do sources[$i]="$(realpath "${sources[$i]}")"; done
source "$root/scripts/cuda-env.sh"
cd "$root"
bash scripts/build.sh
cargo build --release --locked -q --example over-2gib
mkdir -p "$work"
./target/release/examples/over-2gib "$work" "$total" "$objects" "${sources[@]}" >/dev/null
cd "$work"
ls obj*.s | xargs -P "$(nproc)" -I{} sh -c 'as -o "$(basename {} .s).o" {}'
gcc -c main.c -o main.o
mkdir -p wrap && ln -sf "$root/target/release/fatpack" wrap/ld
if [ -n "${OTHER:-}" ]; then mkdir -p wrap-other && ln -sf "$(realpath "$OTHER")" wrap-other/ld; fi
objs="main.o $(ls obj*.o | sort -V | tr '\n' ' ')"
libs="-L$CUDA_HOME/lib -lcudart_static -ldl -lpthread -lrt"
# Peak memory is read from the command's caller (the largest process it waited for): a forked
# link's child and its real linker are not waited for by the command, so links run in one
# process here (FATPACK_FORK=no; a forked link ends sooner by the child's end, milliseconds).
export FATPACK_FORK=no
sync
runs="${RUNS:-3}"
: >rows.txt
measure() { # label, output, command...: one run, appended to rows.txt
    local label=$1 out=$2; shift 2
    rm -f "$out" "$out.fatpack"; sync
    local s=$(date +%s.%N)
    if /usr/bin/time -o time.txt -f "%M" "$@" >/dev/null 2>err.txt; then
        local e=$(date +%s.%N)
        local size=$(stat -c %s "$out"); [ -f "$out.fatpack" ] && size="$size + $(stat -c %s "$out.fatpack")"
        printf "%s\t%.2f\t%d\t%s\n" "$label" "$(echo "$e - $s" | bc)" "$(( $(cat time.txt) / 1024 ))" "$size" >>rows.txt
    else
        printf "%s\tfailed: %s\t\t\n" "$label" "$(grep -m1 -o 'relocation truncated to fit: [A-Z0-9_]*' err.txt || head -c 80 err.txt)" >>rows.txt
    fi
}
echo "device code: $(du -shc obj*.o | tail -1 | cut -f1) in $objects objects; $runs rounds, the links of a round one after another (page cache warm after the first)"
# Rounds rather than repeats of one link: drift (page cache, a busy neighbour) hits every
# link alike, and the ratio to plain ld is taken within the same run.
# VARIANTS picks the links of a round (default: all but level5).
variants="${VARIANTS:-plain packed side tail}"
for r in $(seq "$runs"); do
    for v in $variants; do
        case "$v" in
            plain) measure "plain ld" app_plain gcc -o app_plain $objs $libs ;;
            packed) measure "fatpack ld (packed)" app_packed gcc -Bwrap -o app_packed $objs $libs ;;
            side) measure "fatpack ld --fatpack-side-file" app_side gcc -Bwrap -Wl,--fatpack-side-file -o app_side $objs $libs ;;
            tail) measure "fatpack ld --fatpack-mode=tail" app_tail gcc -Bwrap -Wl,--fatpack-mode=tail -o app_tail $objs $libs ;;
            late) measure "fatpack ld --fatpack-early-link=no" app_late gcc -Bwrap -Wl,--fatpack-early-link=no -o app_late $objs $libs ;;
            other) measure "fatpack ld, OTHER build (packed)" app_other gcc -Bwrap-other -o app_other $objs $libs ;;
            level[0-9]*) measure "fatpack ld --fatpack-level=${v#level}" "app_$v" gcc -Bwrap -Wl,--fatpack-level="${v#level}" -o "app_$v" $objs $libs ;;
            *) echo "unknown variant $v" >&2; exit 2 ;;
        esac
    done
done
python3 - rows.txt <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
order = list(dict.fromkeys(r[0] for r in rows))
def med(label, i):
    v = [float(r[i]) for r in rows if r[0] == label and not r[1].startswith("failed")]
    return statistics.median(v) if v else None
base = med("plain ld", 1)
print("| link | wall s, median (runs) | vs plain ld | peak RSS MiB, max | output bytes |")
print("|---|---:|---:|---:|---:|")
for label in order:
    mine = [r for r in rows if r[0] == label]
    if any(r[1].startswith("failed") for r in mine):
        print(f"| {label} | {mine[0][1]} | | | |")
        continue
    w = med(label, 1)
    ratio = f"{w / base:.2f}x" if base else ""
    print(f"| {label} | {w:.2f} ({', '.join(r[1] for r in mine)}) | {ratio} | {max(int(r[2]) for r in mine)} | {mine[-1][3]} |")
PY
# Where a packed link's time goes (fatpack's own step timings).
rm -f app_packed
FATPACK_VERBOSE=1 gcc -Bwrap -o app_packed $objs $libs 2>&1 | sed "s/^/verbose: /"
