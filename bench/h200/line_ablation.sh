#!/usr/bin/env bash
# ON THE GPU MACHINE: what GNU ld spends on each thing fatpack's direct route adds to the
# static cuBLAS program's line (tests/gpu/cublas). The real linker alone, on:
#   ldplain - the line g++ gave ld in a plain link (logged by a wrapper);
#   rsp     - fatpack's line (`--fatpack-save-temps`'s ld.rsp);
#   nw      - rsp with each `--wrap=X` given as `--defsym=__real_X=X` (no table of wrapped
#             names; not a working program);
#   nT      - rsp without the tail script (`-T fatbin-tail.ld`: the device sections placed
#             last);
#   nrt     - rsp without the runtime and the wraps (fatpack-glue.o, libfatpack_rt.a, its
#             `-u`, the `--wrap`s): the plain line with the tail script;
#   none    - nrt without the tail script: only the output's name differs from ldplain (the
#             control);
# so that rsp - nw is the wraps' table, nw - nrt the runtime (and the members of cudart its
# calls pull in), nrt - none the tail script.
# ROUNDS rounds (default 8), the variants interleaved in each; per variant the medians of
# ld's user and system CPU seconds and of its wall, and the wall round by round against
# ldplain.
#   [ROUNDS=8] bash bench/h200/line_ablation.sh FATPACK
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
FP="$(realpath "$1")"
W="$(mktemp -d "${TMPDIR:-/tmp}/fatpack-ablation.XXXXXX")"
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/fp"
ln -s "$FP" "$W/fp/ld"
source "$root/bench/h200/programs.sh"
logging_ld "$W/ldlog"
g++ -B"$W/fp" -Wl,--fatpack-route=direct -Wl,--fatpack-save-temps -o rsp.bin check.o "${CUBLAS[@]}" 2>/dev/null
LDLOG=ldplain.rsp g++ -B"$W/ldlog" -o plain.bin check.o "${CUBLAS[@]}" || exit 1
T=rsp.bin.fatpack-temps
[ -f "$T/ld.rsp" ] || { echo "no saved line"; exit 1; }
cp "$T/ld.rsp" rsp.rsp
nowrap_line rsp.rsp >nw.rsp
# Drops "-T" and the path after it.
no_tail() { awk 'BEGIN { s = 0 } /^-T$/ { s = 1; next } s == 1 { s = 0; next } { print }' "$1"; }
no_rt() { grep -v -e '/fatpack-glue\.o$' -e '/libfatpack_rt\.a$' -e '^--wrap=' "$1" |
    awk 'BEGIN { s = 0 } /^-u$/ { s = 1; next } s == 1 && /^__wrap_/ { s = 0; next } { if (s) print "-u"; s = 0; print }'; }
no_tail rsp.rsp >nT.rsp
no_rt rsp.rsp >nrt.rsp
no_tail nrt.rsp >none.rsp
wc -l ./*.rsp | sed 's/^/lines: /'
ld @ldplain.rsp && ld @none.rsp && cmp -s plain.bin "$T/out" && echo "none: the plain output, byte for byte" || echo "none: an output other than plain's (the output's name is in it: expected)"
ld @ldplain.rsp # page cache
TIMEFORMAT='%3U %3S %3R'
for round in $(seq "${ROUNDS:-8}"); do
    for v in ldplain rsp nw nT nrt none; do
        { time ld @"$v.rsp" >/dev/null 2>"$v.err"; } 2>&1 | sed "s/^/$v $round /"
    done
done >times.txt
grep -h . ./*.err | sort | uniq -c | head -5
python3 - <<'PY'
import statistics as st
d = {}
for l in open("times.txt"):
    v, r, u, s, w = l.split()
    d.setdefault(v, []).append((float(u), float(s), float(w)))
base = d["ldplain"]
print(f"{'line':8} {'user':>7} {'sys':>7} {'cpu':>7} {'wall':>7}  wall/ldplain round by round (median)")
for v, x in d.items():
    r = sorted(a[2] / b[2] for a, b in zip(x, base))
    print(f"{v:8} {st.median(a for a, _, _ in x):7.3f} {st.median(b for _, b, _ in x):7.3f} "
          f"{st.median(a + b for a, b, _ in x):7.3f} {st.median(c for _, _, c in x):7.3f}  "
          f"{st.median(r):.3f} ({r[0]:.3f}-{r[-1]:.3f})")
PY
