#!/usr/bin/env bash
# ON THE GPU MACHINE: where fatpack's process spends the time its own steps do not count, on
# the static cuBLAS link (the direct route): ROUNDS (default 5) links each way, forked (the
# default for these inputs) and in one process (--fatpack-fork=no), alternated, each timed by
# a small C parent as the linker's caller sees it (fork to reaped), less the total fatpack
# reports; then one forked link under strace (seccomp-filtered, so only the calls named are
# stopped): the process's first and last events, relative to its exec, and the widest gaps.
#   [ROUNDS=5] [STRACE=path] bash bench/h200/exit_probe.sh FATPACK
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
FP="$(realpath "$1")"
W="$(mktemp -d "${TMPDIR:-/tmp}/fatpack-exit.XXXXXX")"
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/fp"
ln -s "$FP" "$W/fp/ld"
source "$root/bench/h200/parent_timer.sh"
parent_timer "$W/fpt" "$FP"
source "$root/bench/h200/programs.sh"
g++ -o plain.bin check.o "${CUBLAS[@]}" # page cache
for r in $(seq "${ROUNDS:-5}"); do
    for fork in auto no; do
        rm -f wall
        FPWALL=wall g++ -B"$W/fpt" -Wl,--fatpack-verbose -Wl,--fatpack-fork=$fork -o "$fork.bin" check.o "${CUBLAS[@]}" 2>err.txt
        total=$(grep -o "total [0-9.]*s" err.txt | grep -o "[0-9.]*")
        printf "round %d fork=%-4s parent saw %s s, total %s s, outside %.1f ms; %s\n" "$r" "$fork" "$(cat wall)" "$total" \
            "$(awk -v a="$(cat wall)" -v b="$total" 'BEGIN { print 1000 * (a - b) }')" "$(grep -o "process: .*" err.txt | cut -c1-60)"
    done
done
cmp -s auto.bin no.bin && echo "forked and one-process outputs: the same bytes" || echo "forked and one-process outputs DIFFER"
# STRACE=path: a strace brought along (with its libraries beside it).
ST="${STRACE:-$(command -v strace)}"
[ -x "$ST" ] || { echo "no strace here"; exit 0; }
LD_LIBRARY_PATH="$(dirname "$ST")" "$ST" -f --seccomp-bpf -ttt -o trace.txt \
    -e trace=execve,exit_group,wait4,write,close,munmap,unlink,unlinkat,rename,renameat2,pipe2,clone,clone3,fork,vfork,ftruncate,fallocate,madvise \
    g++ -B"$W/fp" -Wl,--fatpack-verbose -o traced.bin check.o "${CUBLAS[@]}" 2>err.txt
python3 - trace.txt <<'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
ev = []
for l in lines:
    m = re.match(r"(\d+)\s+(\d+\.\d+)\s+(.*)", l)
    if m:
        ev.append((int(m.group(1)), float(m.group(2)), m.group(3)))
# fatpack: the pid that exec'd the wrapper's ld, and the pids it forked (not the real ld's).
start = next((e for e in ev if e[2].startswith("execve(") and "/fp/ld" in e[2]), None)
if not start:
    print("no fatpack exec in the trace"); sys.exit()
fp = {start[0]}
for p, t, s in ev:
    m = re.match(r"(clone3?|fork|vfork)\(.*\)\s*=\s*(\d+)", s)
    if p in fp and m and "CLONE_THREAD" not in s:
        fp.add(int(m.group(2)))
ld_pids = {p for p, t, s in ev if p in fp and s.startswith("execve(") and "/fp/ld" not in s}
mine = [e for e in ev if e[0] in fp and e[0] not in ld_pids]
t0 = start[1]
print(f"fatpack pids {sorted(fp - ld_pids)}, real ld {sorted(ld_pids)}")
print("first events (ms after fatpack's exec):")
for p, t, s in mine[:12]:
    print(f"  {1000*(t-t0):9.2f}  {p}  {s[:110]}")
# From the line that says the total (the end of what fatpack's steps count) to the end.
end = next((i for i, e in enumerate(mine) if e[2].startswith("write(2") and "total " in e[2]), len(mine) - 30)
tail = mine[end:]
print(f"from the total's line to the end: {len(tail)} events, {1000*(tail[-1][1]-tail[0][1]):.2f} ms")
counts = {}
for p, t, s in tail:
    k = s.split("(")[0]
    counts[k] = counts.get(k, 0) + 1
print("  by call: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])))
for p, t, s in tail[:160]:
    print(f"  {1000*(t-t0):9.2f}  {p}  {s[:110]}")
gaps = sorted(((b[1] - a[1], a, b) for a, b in zip(mine, mine[1:])), reverse=True)[:8]
print("widest gaps between fatpack's events:")
for g, a, b in gaps:
    print(f"  {1000*g:8.2f} ms  after {1000*(a[1]-t0):9.2f} {a[0]} {a[2][:60]}  ->  {b[0]} {b[2][:60]}")
PY
grep -o "total [0-9.]*s" err.txt
