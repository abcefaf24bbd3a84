#!/usr/bin/env bash
# ON THE GPU MACHINE: the default link's two routes against plain ld, on the two programs of
# issue 24, 5 interleaved rounds each, warm page cache, one fatpack build:
#   plain  - g++/nvcc with the system ld;
#   copy   - fatpack ld --fatpack-route=copy, the inputs with device code copied with stubs;
#   direct - fatpack ld --fatpack-route=direct, the inputs linked as given and the output's
#            containers replaced by stubs afterwards;
#   late   - the direct route with its link started after the scan (--fatpack-early-link=no;
#            `direct` starts it before, both lines naming cudart);
#   tN     - `direct` with --fatpack-threads=N, t4 or t2, say (the store's work beside the
#            linker on fewer CPUs);
#   rsp    - the real linker alone on the direct route's line (`ld @ld.rsp`, from a
#            --fatpack-save-temps link made before the rounds): what ld itself takes there;
#   rspnw  - `rsp` with each `--wrap=X` given as `--defsym=__real_X=X` (needs rsp in WHO): the
#            same symbols resolved and nothing wrapped (not a working program), to part the
#            wraps' cost from the rest of fatpack's line: GNU ld with any --wrap looks every
#            global symbol's name up once more, in its table of wrapped names;
#   ldplain - the real linker alone on the plain link's line (`ld @PROGRAM.rsp`, the line
#            g++ gave ld in a logged plain link made before the rounds): what ld takes of
#            the plain command;
#   onep   - `direct` in one process (--fatpack-fork=no): against `direct`, which forks
#            for these inputs and ends once the output is in place, what the process's own
#            end costs the link;
#   directw - `direct` with fatpack started by a small C program that times it as its
#            parent sees it (fork to exit, its exit's teardown included): against the
#            `total` fatpack reports, what its process costs outside its steps;
# Each link's stderr records the real linker's CPU time (fatpack's verbose "linker CPU"
# line; bash's `time` for ld alone), and their medians are printed per variant: with the
# walls, whether fatpack's work beside the linker slows it.
# And which of the two the default (--fatpack-route=auto) takes for each program. With
# plain, ldplain, rsp and direct all in WHO, it then accounts, per program, for the direct
# link's time over plain's, part by part (medians of the rounds).
# nvcc's own temp files on those saved lines are kept (-keep) so that they can be linked again.
# Programs: the static cuBLAS program of tests/gpu/cublas (g++ -B), and bench/h200/five_libs.cu
# on static cuBLAS, cuSOLVER, cuSPARSE, cuFFT (device-linked callback) and cuRAND through
# `nvcc -rdc=true`. Prints wall times, medians and ratios, the direct route's steps, whether
# both routes wrote the same store, sizes, and each binary's checks on the GPU.
#   [ROUNDS=5] [PROGRAMS="cublas five"] [WHO="plain copy direct"] bash bench/h200/link_routes.sh FATPACK
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
FP="$(realpath "$1")"
TIMEFORMAT='ld CPU: user %3Us, sys %3Ss'
W="$(mktemp -d "${TMPDIR:-/tmp}/fatpack-routes.XXXXXX")"
trap 'rm -rf "$W"' EXIT
# Each variant's outputs in a folder of its name (plain's always: it warms the page cache).
mkdir -p "$W/fp" "$W/keep" "$W/plain"
for who in ${WHO:-plain copy direct}; do mkdir -p "$W/$who"; done
ln -s "$FP" "$W/fp/ld"
printf '#!/bin/sh\nexec g++ -B"%s" "$@"\n' "$W/fp" >"$W/fp/g++" && chmod +x "$W/fp/g++"
# A timing parent for fatpack as ld: appends fatpack's wall, fork to reaped, to $FPWALL.
mkdir -p "$W/directw"
source "$root/bench/h200/parent_timer.sh"
parent_timer "$W/fpt" "$FP"
source "$root/bench/h200/programs.sh"
logging_ld "$W/ldlog"
link() { # PROGRAM WHO: writes WHO/PROGRAM.bin (one name per program: nvcc names its
         # device-link object after the output, and the store records module names)
    local prog=$1 who=$2 out="$2/$1.bin"
    case $prog.$who in
    cublas.plain) g++ -o "$out" check.o "${CUBLAS[@]}" ;;
    cublas.copy) g++ -B"$W/fp" -Wl,--fatpack-verbose -Wl,--fatpack-route=copy -o "$out" check.o "${CUBLAS[@]}" ;;
    cublas.direct) g++ -B"$W/fp" -Wl,--fatpack-verbose -Wl,--fatpack-route=direct -o "$out" check.o "${CUBLAS[@]}" ;;
    cublas.directw) FPWALL="$W/directw/cublas.walls" g++ -B"$W/fpt" -Wl,--fatpack-verbose -Wl,--fatpack-route=direct -o "$out" check.o "${CUBLAS[@]}" ;;
    five.directw) FPWALL="$W/directw/five.walls" nvcc -rdc=true -arch=sm_90 -ccbin "$W/fpt/g++" -Xlinker --fatpack-verbose -Xlinker --fatpack-route=direct -o "$out" five.o "${FIVE[@]}" ;;
    cublas.onep) g++ -B"$W/fp" -Wl,--fatpack-verbose -Wl,--fatpack-route=direct -Wl,--fatpack-fork=no -o "$out" check.o "${CUBLAS[@]}" ;;
    five.onep) nvcc -rdc=true -arch=sm_90 -ccbin "$W/fp/g++" -Xlinker --fatpack-verbose -Xlinker --fatpack-route=direct -Xlinker --fatpack-fork=no -o "$out" five.o "${FIVE[@]}" ;;
    cublas.late) g++ -B"$W/fp" -Wl,--fatpack-verbose -Wl,--fatpack-route=direct -Wl,--fatpack-early-link=no -o "$out" check.o "${CUBLAS[@]}" ;;
    cublas.t[0-9]*) g++ -B"$W/fp" -Wl,--fatpack-verbose -Wl,--fatpack-route=direct -Wl,--fatpack-threads="${who#t}" -o "$out" check.o "${CUBLAS[@]}" ;;
    five.t[0-9]*) nvcc -rdc=true -arch=sm_90 -ccbin "$W/fp/g++" -Xlinker --fatpack-verbose -Xlinker --fatpack-route=direct -Xlinker --fatpack-threads="${who#t}" -o "$out" five.o "${FIVE[@]}" ;;
    *.rsp) time ld @"$W/rsp/$prog.bin.fatpack-temps/ld.rsp" ;;
    *.rspnw) time ld @"$W/rsp/$prog.bin.fatpack-temps/nowrap.rsp" ;;
    *.ldplain) time ld @"$W/ldplain/$prog.rsp" ;;
    five.plain) nvcc -rdc=true -arch=sm_90 -o "$out" five.o "${FIVE[@]}" ;;
    five.copy) nvcc -rdc=true -arch=sm_90 -ccbin "$W/fp/g++" -Xlinker --fatpack-verbose -Xlinker --fatpack-route=copy -o "$out" five.o "${FIVE[@]}" ;;
    five.direct) nvcc -rdc=true -arch=sm_90 -ccbin "$W/fp/g++" -Xlinker --fatpack-verbose -Xlinker --fatpack-route=direct -o "$out" five.o "${FIVE[@]}" ;;
    five.late) nvcc -rdc=true -arch=sm_90 -ccbin "$W/fp/g++" -Xlinker --fatpack-verbose -Xlinker --fatpack-route=direct -Xlinker --fatpack-early-link=no -o "$out" five.o "${FIVE[@]}" ;;
    esac
}
for prog in ${PROGRAMS:-cublas five}; do
    case " ${WHO:-} " in
    *" rsp "*)
        case $prog in
        cublas) g++ -B"$W/fp" -Wl,--fatpack-route=direct -Wl,--fatpack-save-temps -o rsp/cublas.bin check.o "${CUBLAS[@]}" ;;
        five) nvcc -rdc=true -arch=sm_90 -keep -keep-dir keep -ccbin "$W/fp/g++" -Xlinker --fatpack-route=direct -Xlinker --fatpack-save-temps -o rsp/five.bin five.o "${FIVE[@]}" ;;
        esac 2>/dev/null
        nowrap_line "rsp/$prog.bin.fatpack-temps/ld.rsp" >"rsp/$prog.bin.fatpack-temps/nowrap.rsp" ;;
    esac
    case " ${WHO:-} " in
    *" ldplain "*)
        case $prog in
        cublas) LDLOG=ldplain/cublas.rsp g++ -B"$W/ldlog" -o ldplain/cublas.bin check.o "${CUBLAS[@]}" ;;
        five) LDLOG=ldplain/five.rsp nvcc -rdc=true -arch=sm_90 -keep -keep-dir keep -ccbin "$W/ldlog/g++" -o ldplain/five.bin five.o "${FIVE[@]}" ;;
        esac 2>/dev/null ;;
    esac
    link "$prog" plain 2>/dev/null # page cache
    for round in $(seq "${ROUNDS:-5}"); do
        for who in ${WHO:-plain copy direct}; do
            timed "$prog.$who.$round" "$prog" "$who"
        done
    done
done >times.txt
medians times.txt
# Where the direct link's time over plain's goes (WHO with plain, ldplain, rsp and direct).
python3 - <<'PY'
import re, statistics
rows = [l.split() for l in open("times.txt")]
walls = {}
for name, wall, rc in rows:
    prog, who, rnd = name.split(".")
    walls.setdefault(prog, {}).setdefault(who, []).append(float(wall))
for prog, w in walls.items():
    if not all(k in w for k in ("plain", "ldplain", "rsp", "direct")):
        continue
    med = {k: statistics.median(v) for k, v in w.items()}
    steps, total = {}, []
    for rnd in range(1, len(w["direct"]) + 1):
        err = open(f"{prog}.direct.{rnd}.err").read()
        for k, v in re.findall(r"([a-z][a-z ]+) ([0-9.]+)s", re.search(r"steps: (.*)", err).group(1)):
            steps.setdefault(k.strip(), []).append(float(v))
        total.append(float(re.search(r"total ([0-9.]+)s", err).group(1)))
    st = {k: statistics.median(v) for k, v in steps.items()}
    fp_total = statistics.median(total)
    after = st.get("stub output", 0) + st.get("write store", 0) + st.get("commit output", 0)
    # fatpack's steps up to the end of the real link (with the early link, the scan and the
    # naming of modules ran beside it), against the real linker alone on the same line.
    line = [("ld alone: on fatpack's line - on the plain line (rsp - ldplain)", med["rsp"] - med["ldplain"])]
    if "rspnw" in med:
        line = [("ld alone: the wraps (rsp - rspnw)", med["rsp"] - med["rspnw"]),
                ("ld alone: the rest of fatpack's line (rspnw - ldplain)", med["rspnw"] - med["ldplain"])]
    extra = line + [
        ("fatpack until the link ended - ld alone on its line", fp_total - after - med["rsp"]),
        ("stub output (after the link)", st.get("stub output", 0)),
        ("write store (after the link)", st.get("write store", 0)),
        ("commit output (after the link)", st.get("commit output", 0)),
    ]
    rest = med["direct"] - med["plain"] - sum(v for _, v in extra)
    extra.append(("the command around fatpack - around ld (the rest)", rest))
    print(f"{prog}: where the direct link's time over plain's goes (medians of {len(w['direct'])} rounds)")
    print(f"{prog}:   plain {med['plain']:.3f} s = ld alone on its line {med['ldplain']:.3f} s + the command around it {med['plain'] - med['ldplain']:.3f} s")
    for k, v in extra:
        print(f"{prog}:   {k:<62} {v:+7.3f} s {100 * v / med['plain']:+6.2f} %")
    d = med["direct"] - med["plain"]
    print(f"{prog}:   {'direct - plain':<62} {d:+7.3f} s {100 * d / med['plain']:+6.2f} %")
# Each variant against plain in the same round (the rounds' ratios, their median): a slow
# spell of a shared machine that lasts a round falls on both links of it.
for prog, w in walls.items():
    if "plain" not in w:
        continue
    for who, v in w.items():
        if who == "plain" or len(v) != len(w["plain"]):
            continue
        r = sorted(a / b for a, b in zip(v, w["plain"]))
        print(f"{prog}: {who} / plain, round by round: median {statistics.median(r):.3f} "
              f"(rounds {r[0]:.3f}-{r[-1]:.3f}, {sum(x <= 1.03 for x in r)} of {len(r)} at or under 1.03)")
# The real linker's CPU time per variant (medians over the rounds).
for prog, w in walls.items():
    cpu = {}
    for who, v in w.items():
        for rnd in range(1, len(v) + 1):
            m = re.search(r"(?:linker|ld) CPU: user ([0-9.]+)s, sys ([0-9.]+)s",
                          open(f"{prog}.{who}.{rnd}.err").read())
            if m:
                cpu.setdefault(who, []).append((float(m.group(1)), float(m.group(2))))
    if cpu:
        print(f"{prog}: the real linker's CPU, user + sys (s, medians): " + ", ".join(
            f"{who} {statistics.median(u for u, _ in v):.3f} + {statistics.median(s for _, s in v):.3f}"
            for who, v in cpu.items()))
# The steps after the link, part by part (medians over the direct rounds).
for prog, w in walls.items():
    if "direct" not in w:
        continue
    parts = {}
    for rnd in range(1, len(w["direct"]) + 1):
        m = re.search(r"after the link, part by part: (.*)", open(f"{prog}.direct.{rnd}.err").read())
        for k, v in re.findall(r"([a-z][a-z ]+) ([0-9.]+)s", m.group(1) if m else ""):
            parts.setdefault(k.strip(), []).append(float(v))
    if parts:
        line = ", ".join(f"{k} {1000 * statistics.median(v):.0f}" for k, v in parts.items())
        print(f"{prog}: after the link, part by part (ms, medians of {len(w['direct'])}): {line}")
    # Outside the steps: before the first, the cleanup after the last (both printed by
    # --fatpack-verbose), and with directw, the process as its parent saw it.
    edges = {"before the first step": [], "cleanup after the last": []}
    for rnd in range(1, len(w["direct"]) + 1):
        m = re.search(r"before the first step ([0-9.]+)s; cleanup after the last [^0-9]*([0-9.]+)s",
                      open(f"{prog}.direct.{rnd}.err").read())
        if m:
            edges["before the first step"].append(float(m.group(1)))
            edges["cleanup after the last"].append(float(m.group(2)))
    if edges["before the first step"]:
        print(f"{prog}: outside the steps (ms, medians): " + ", ".join(
            f"{k} {1000 * statistics.median(v):.0f}" for k, v in edges.items()))
    if "directw" in w:
        try:
            pw = [float(x) for x in open(f"directw/{prog}.walls")]
        except OSError:
            pw = []
        tot = []
        for rnd in range(1, len(w["directw"]) + 1):
            m = re.search(r"total ([0-9.]+)s", open(f"{prog}.directw.{rnd}.err").read())
            tot.append(float(m.group(1)) if m else float("nan"))
        if pw and len(pw) == len(tot):
            d = statistics.median(a - b for a, b in zip(pw, tot))
            print(f"{prog}: fatpack's process as its parent saw it - the total it reports "
                  f"(start-up, cleanup, exit), median of {len(pw)}: {1000 * d:.0f} ms")
PY
# The route the default (--fatpack-route=auto) takes for each program.
g++ -B"$W/fp" -Wl,--fatpack-dry-run -o auto.bin check.o "${CUBLAS[@]}" | grep "^route:" | sed "s/^/cublas auto: /"
nvcc -rdc=true -arch=sm_90 -ccbin "$W/fp/g++" -Xlinker --fatpack-dry-run -o auto.bin five.o "${FIVE[@]}" | grep "^route:" | sed "s/^/five auto: /"
for prog in ${PROGRAMS:-cublas five}; do
    for who in ${WHO:-plain copy direct}; do
        [ "$who" = plain ] && continue
        grep -h "early link:" "$prog.$who.${ROUNDS:-5}.err" | sed "s/^/$prog $who: /"
        grep -h "steps:\|store:\|route:\|packed \|part by part" "$prog.$who.${ROUNDS:-5}.err" | sed "s/^/$prog $who: /"
    done
    if [ -f "onep/$prog.bin" ] && [ -f "direct/$prog.bin" ]; then
        cmp -s "onep/$prog.bin" "direct/$prog.bin" && echo "$prog: onep and direct wrote the same bytes" || echo "$prog: onep and direct DIFFER"
    fi
    # The same store, or the same modules in the same order under other names (byte-identical
    # containers of archive members the linker pulled out of the archive's order).
    ref=copy
    [ -f "copy/$prog.bin" ] || ref=late
    # Nothing to compare with when only the direct route ran (WHO="plain direct").
    { [ -f "$ref/$prog.bin" ] && [ -f "direct/$prog.bin" ]; } || continue
    "$FP" inspect --json "$ref/$prog.bin" >ref.json
    "$FP" inspect --json "direct/$prog.bin" >direct.json
    [ "$ref" = late ] && { cmp -s "late/$prog.bin" "direct/$prog.bin" && echo "$prog: late and direct wrote the same bytes" || echo "$prog: late and direct DIFFER"; }
    python3 - "$prog" "$ref" <<'PY'
import json, sys
a, b = (json.load(open(f))[0] for f in ("ref.json", "direct.json"))
prog, ref = sys.argv[1], sys.argv[2]
if a["packed"]["digest"] == b["packed"]["digest"]:
    print(f"{prog}: {ref} and direct wrote the same store ({a['packed']['digest']})")
else:
    key = lambda m: json.dumps(m["entries"], sort_keys=True)
    same = [key(x) == key(y) for x, y in zip(a["modules"], b["modules"])]
    renamed = sum(x["origin"] != y["origin"] for x, y in zip(a["modules"], b["modules"]))
    print(f"{prog}: stores differ; {sum(same)} of {len(a['modules'])}/{len(b['modules'])} modules "
          f"hold the same entries in the same place, {renamed} under another name; "
          f"store {a['packed']['store_size']} vs {b['packed']['store_size']} bytes")
PY
done
for who in ${WHO:-plain copy direct}; do
    if [ -f "$who/cublas.bin" ]; then
        out="$(timeout 300 "$who/cublas.bin" 2>&1)"
        echo "cublas $who: rc $? $(echo "$out" | grep -c 'cublas_check: PASS') PASS, $(stat -c %s "$who/cublas.bin") bytes"
    fi
    if [ -f "$who/five.bin" ]; then
        out="$(timeout 300 "$who/five.bin" 2>&1)"
        echo "five $who: rc $? $(echo "$out" | grep -c 'five_libs: PASS') PASS, $(stat -c %s "$who/five.bin") bytes; $(echo "$out" | tail -1)"
    fi
done
grep -h "FAIL\|error" ./*.err 2>/dev/null | head -5
