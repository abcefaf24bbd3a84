#!/usr/bin/env bash
# Whether the store step's copy could be cheaper: the step writes each blob made ready beside
# the linker from a mapping of its temp file into the output (`write`, one blob after another,
# in the linker's order). A C program makes a temp file of MIB MiB in BLOBS blobs (in the page
# cache, as the made-ready file is) and copies them, out of order, into a new file, either
# from a mapping with `write` (what the store step does) or with `copy_file_range` (in the
# kernel, no mapping); ROUNDS rounds alternating, the output removed and the disk synced
# between; prints each copy's milliseconds and the medians. Static cuBLAS: 69.7 MiB, 666 blobs.
#   bash bench/store_copy_probe.sh [MIB=70] [BLOBS=666] [ROUNDS=7]
set -euo pipefail
mib=${1:-70} blobs=${2:-666} rounds=${3:-7}
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
cat >"$w/probe.c" <<'C'
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}
int main(int argc, char **argv) {
    size_t total = (size_t)atol(argv[1]) << 20, n = (size_t)atol(argv[2]);
    int mode = atoi(argv[3]);
    char spill[4096];
    snprintf(spill, sizeof spill, "%s/spillXXXXXX", argv[4]);
    int sp = mkstemp(spill);
    unlink(spill);
    char *buf = malloc(total);
    for (size_t i = 0; i < total; i++) buf[i] = (char)((i * 2654435761u) >> 13);
    if (write(sp, buf, total) != (ssize_t)total) return 1;
    size_t len = total / n;
    int out = open(argv[5], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    double t0 = now();
    if (mode == 0) {
        char *m = mmap(0, total, PROT_READ, MAP_PRIVATE, sp, 0);
        for (size_t i = 0; i < n; i++)
            if (write(out, m + ((i * 7919) % n) * len, len) != (ssize_t)len) return 1;
    } else {
        for (size_t i = 0; i < n; i++) {
            loff_t at = ((i * 7919) % n) * len;
            if (copy_file_range(sp, &at, out, NULL, len, 0) != (ssize_t)len) return 1;
        }
    }
    printf("%s %.2f\n", mode == 0 ? "mmap+write" : "copy_file_range", (now() - t0) * 1e3);
    return 0;
}
C
gcc -O2 -o "$w/probe" "$w/probe.c"
echo "machine: $(nproc) CPUs, $(uname -r), $(df -T "$w" | awk 'NR == 2 { print $2 }') under $w; $mib MiB in $blobs blobs"
for _ in $(seq "$rounds"); do
    for mode in 0 1; do
        rm -f "$w/out"; sync; sleep 0.2
        "$w/probe" "$mib" "$blobs" "$mode" "$w" "$w/out"
    done
done | tee "$w/times"
python3 - "$w/times" <<'PY'
import statistics, sys
t = {}
for l in open(sys.argv[1]):
    k, v = l.split()
    t.setdefault(k, []).append(float(v))
print("medians (ms): " + ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in t.items()))
PY
