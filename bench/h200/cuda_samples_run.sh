#!/usr/bin/env bash
# ON THE GPU MACHINE, after bench/cuda_samples_relink.sh WORK: runs every relinked sample as
# the plain link wrote it and as the default `fatpack run` wrote it (WORK/out-plain and
# WORK/out-auto), each from the same folder, and compares what each printed and its exit
# status. Lines that carry a time or a throughput (they differ from run to run) are left out
# of the comparison. Prints one line per sample (with the lines that differ) and the counts.
# Some samples print what changes on every run, plain or not (asyncAPI's idle iterations,
# clock's average clocks, simpleStreams' kernel time, UnifiedMemoryStreams' random task
# sizes): read what differs.
#   bash bench/h200/cuda_samples_run.sh WORK [TIMEOUT_S=30]
set -u
work="$1"; limit="${2:-30}"
same=0 differ=0 n=0 exits=0
# Timings, rates, addresses and process ids (simpleIPC's shared-memory name) change from run
# to run; everything else must match.
filter() {
    grep -viE 'time|sec|[0-9]+ ?(ms|us)\b|gb/s|gflop|throughput|bandwidth|0x[0-9a-f]{6,}|elapsed' |
        sed -E 's/(shm|pid[ =:]*)[0-9]+/\1N/gI' || true
}
for p in "$work"/out-plain/*; do
    name=$(basename "$p")
    a="$work/out-auto/$name"
    [ -x "$p" ] && [ -x "$a" ] || continue
    case "$name" in *.so) continue ;; esac
    n=$((n + 1))
    op=$(cd "$work/out-plain" && timeout "$limit" "./$name" 2>&1 < /dev/null); rp=$?
    oa=$(cd "$work/out-auto" && timeout "$limit" "./$name" 2>&1 < /dev/null); ra=$?
    [ "$rp" = "$ra" ] && exits=$((exits + 1))
    if [ "$rp" = "$ra" ] && [ "$(filter <<<"$op")" = "$(filter <<<"$oa")" ]; then
        same=$((same + 1))
        printf 'same    %-48s exit %s\n' "$name" "$rp"
    else
        differ=$((differ + 1))
        printf 'DIFFERS %-48s exit %s vs %s\n' "$name" "$rp" "$ra"
        diff <(filter <<<"$op") <(filter <<<"$oa") | head -6
    fi
done
echo "$same of $n samples printed the same and exited the same, plain and under fatpack; $differ differ"
echo "$exits of $n exited with the same status both ways"
[ "$differ" = 0 ]
