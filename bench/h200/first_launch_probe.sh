#!/usr/bin/env bash
# ON THE GPU MACHINE: where a packed program's first launch goes. Runs tests/gpu's
# first_kernel in the variants under DIR (DIR/<variant>/first_kernel: plain, plain_size,
# packed, ...) interleaved, RUNS times each, and prints the median first launch; for packed
# variants also the runtime's own split of it (FATPACK_LOG=info, separate runs: set-up,
# decode and check, cudart), medians.
#   bash bench/h200/first_launch_probe.sh DIR [RUNS=11]
set -euo pipefail
dir="$1"; runs="${2:-11}"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
variants=$(cd "$dir" && ls -d */ | tr -d / | tr '\n' ' ')
declare -A fl
for r in $(seq "$runs"); do
    for v in $variants; do
        line=$("$dir/$v/first_kernel" 2>/dev/null | grep main_to_first_kernel_ms) || { echo "$v: run $r failed"; exit 1; }
        grep -q check=PASS <<<"$line" || { echo "$v: wrong result: $line"; exit 1; }
        fl[$v]+="$(sed 's/.*first_launch_ms=\([0-9.]*\).*/\1/' <<<"$line") "
    done
done
med() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf '%-22s %10s\n' variant "1st launch ms (median of $runs)"
for v in $variants; do printf '%-22s %10s\n' "$v" "$(med <<<"${fl[$v]}")"; done
for v in $variants; do
    grep -qa FATPACK_LOG "$dir/$v/first_kernel" || continue
    s=""; d=""; c=""; t=""
    for r in $(seq "$runs"); do
        log=$(FATPACK_LOG=info "$dir/$v/first_kernel" 2>&1 >/dev/null | grep -m1 'registered' || true)
        [ -n "$log" ] || { echo "$v: no runtime log line"; break; }
        t+="$(sed -n 's/.* in \([0-9.]*\) ms.*/\1/p' <<<"$log") "
        s+="$(sed -n 's/.*set-up \([0-9.]*\).*/\1/p' <<<"$log") "
        d+="$(sed -n 's/.*decode and check \([0-9.]*\).*/\1/p' <<<"$log") "
        c+="$(sed -n 's/.*cudart \([0-9.]*\)).*/\1/p' <<<"$log") "
    done
    echo "$v runtime split, ms (medians): total $(med <<<"$t"), set-up $(med <<<"$s"), decode and check $(med <<<"$d"), cudart $(med <<<"$c")"
    FATPACK_LOG=info "$dir/$v/first_kernel" 2>&1 >/dev/null | grep -m3 'registered\|chose\|module' || true
done
