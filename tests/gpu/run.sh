#!/usr/bin/env bash
# Runs the fatpack GPU suite ON THE GPU MACHINE, from what tests/gpu/build.sh produced.
#
#   bash tests/gpu/run.sh OUTDIR            (a folder, or the OUTDIR.tar.xz build.sh writes)
#
# Needs only bash, coreutils and python3 (no readelf, no network, no CUDA toolkit). Does:
#   1. every suite variant (plain, plain_compress_all, packed, packed_shared_cudart, ptx_only,
#      ptx_only_plain, packed_side_file, packed_stripped, ..., packed_release_link: a release
#      store from -Wl,--fatpack-release, split_release_sm90: its split, sm_90 packs only);
#   2. runtime checks: FATPACK_LOG=info choices (sm_XY of the device; compute_80 for ptx_only),
#      FATPACK_ARCH=compute_XY forcing PTX, FATPACK_ARCH=sm_80 failing cleanly, FATPACK_EAGER,
#      CUDA_MODULE_LOADING=EAGER, tampered stores (header, used blob, middle byte), a missing
#      and a foreign side file: each must fail with a clear message, never a signal;
#   3. first_kernel measurements (bench.py): size, start->exit, main->first kernel, first launch,
#      RSS, device memory, median of 9 runs.
# Prints a summary; writes gpu_results.txt and the logs to $OUT if it is set. Exit 0 only if
# every check passed. Keeps going after a failed check.
set -u

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
arg="${1:-}"
if [ -z "$arg" ]; then
    echo "usage: bash tests/gpu/run.sh OUTDIR|OUTDIR.tar.xz" >&2
    exit 2
fi
T="$(mktemp -d "${TMPDIR:-/tmp}/fatpack-gpu.XXXXXX")"
mkdir -p "$T/logs"
start=$SECONDS

if [ -f "$arg" ]; then
    echo "run.sh: extracting $arg"
    if ! python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$arg" "$T/x" 2>"$T/logs/extract.log"; then
        tar -xf "$arg" -C "$T/x" 2>>"$T/logs/extract.log" || { cat "$T/logs/extract.log"; echo "run.sh: cannot extract $arg" >&2; exit 2; }
    fi
    O="$(dirname "$(find "$T/x" -name BUILD_STATUS | head -1)")"
else
    O="$(cd "$arg" && pwd)"
fi
if [ ! -f "$O/BUILD_STATUS" ]; then
    echo "run.sh: $arg is not a build.sh output (no BUILD_STATUS)" >&2
    exit 2
fi
TAMPER="$here/tamper.py"
[ -f "$TAMPER" ] || TAMPER="$O/tamper.py"
BENCH="$here/bench/bench.py"
[ -f "$BENCH" ] || BENCH="$O/bench.py"

results=()
npass=0
nfail=0
pass() {
    npass=$((npass + 1))
    results+=("PASS  $1")
    echo "  PASS  $1"
}
fail() {
    nfail=$((nfail + 1))
    results+=("FAIL  $1${2:+: $2}")
    echo "  FAIL  $1${2:+: $2}"
}
built() { grep -q "^$1 OK" "$O/BUILD_STATUS"; }

echo "run.sh: outputs $O"
sed 's/^/  /' "$O/BUILD_INFO.txt" 2>/dev/null
echo "run.sh: host $(uname -srm), $(nproc) CPUs"
if command -v nvidia-smi >/dev/null 2>&1; then
    timeout 20 nvidia-smi --query-gpu=index,name,compute_cap,driver_version,memory.used,memory.total --format=csv,noheader 2>&1 | sed 's/^/  nvidia-smi: /'
fi
# JIT results must not come from a cache filled by an earlier run.
export CUDA_CACHE_DISABLE=1
unset FATPACK_LOG FATPACK_ARCH FATPACK_EAGER CUDA_MODULE_LOADING

# run_suite LOGNAME DIR [VAR=VALUE...] [-- ARGS]: runs DIR/suite with a time limit; sets RC.
run_suite() {
    local log="$T/logs/$1.log" dir="$2"
    shift 2
    local envs=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do envs+=("$1"); shift; done
    [ "${1:-}" = -- ] && shift
    env ${envs[@]+"${envs[@]}"} timeout -k 5 120 "$dir/suite" "$@" >"$log" 2>&1
    RC=$?
    LOG="$log"
}
# why LOG RC: a short reason for a failed run.
why() {
    local s
    s="$(grep -m1 '^suite:' "$1")"
    if [ "$2" -ge 124 ]; then
        s="$s rc=$2 ($([ "$2" = 124 ] && echo timeout || echo "killed by signal $(($2 - 128))"))"
    else
        s="$s rc=$2"
    fi
    echo "$s"
}
# show_failures LOG: each FAIL line with the detail lines the test printed before it.
show_failures() {
    awk '/^(PASS|FAIL) /{ if ($1 == "FAIL") { printf "%s", buf; print } buf = ""; next }
         /^    / { buf = buf $0 "\n" }' "$1" | head -n 40 | sed 's/^/        /'
}

# --- 1. every suite variant --------------------------------------------------------------
echo
echo "== suite variants"
CAP=""
VARIANTS=(plain plain_compress_all packed packed_direct packed_script packed_shared_cudart ptx_only ptx_only_plain packed_side_file packed_stripped packed_eu_stripped tail pruned_packed pruned_plain pruned_tail split_packed split_packed_sm90 packed_release_link split_release_sm90)
declare -A suite_ms
for v in "${VARIANTS[@]}"; do
    if ! built "$v"; then
        fail "suite $v" "not built ($(grep "^$v " "$O/BUILD_STATUS" | cut -d' ' -f2- || echo missing))"
        continue
    fi
    run_suite "suite_$v" "$O/$v"
    if [ -z "$CAP" ]; then
        CAP="$(sed -n 's/^device 0: .*compute capability \([0-9]*\)\.\([0-9]*\),.*/\1\2/p' "$LOG" | head -1)"
        grep -m1 '^device 0:' "$LOG" | sed 's/^/  /'
        grep -m1 '^cuda runtime' "$LOG" | sed 's/^/  /'
    fi
    suite_ms[$v]="$(sed -n 's/^suite: .*(\([0-9]*\) ms)$/\1/p' "$LOG")"
    if [ $RC = 0 ] && grep -q '^suite: [0-9]* passed, 0 failed' "$LOG"; then
        pass "suite $v ($(grep -m1 '^suite:' "$LOG" | cut -d' ' -f2-))"
    else
        fail "suite $v" "$(why "$LOG" $RC)"
        show_failures "$LOG"
    fi
done
if [ -z "$CAP" ]; then
    echo "run.sh: no device found by the suite; the runtime checks below will fail" >&2
    CAP=90
fi
MAJ=$((CAP / 10))
echo "  device capability: sm_$CAP"

# --- 2. runtime-specific checks --------------------------------------------------------------
echo
echo "== runtime checks (packed suite)"
P="$O/packed"
# choices LOG: the runtime's "compute capability X.Y (device N): CHOICE" lines, one a line.
choices() { sed -n 's/^fatpack: module .*: compute capability [0-9.]* (devices\{0,1\} [0-9, ]*): \(.*\)$/\1/p' "$1"; }
count_mod() { grep -cE "^fatpack: module (.*/)?$2#[0-9]*: compute capability [0-9.]* \(devices? [0-9, ]*\): $3\$" "$1"; }
summary_choices() { choices "$1" | sort | uniq -c | tr -s ' ' | paste -sd, -; }
if built packed; then

    run_suite info "$P" FATPACK_LOG=info
    c="$(summary_choices "$LOG")"
    n_ok="$(choices "$LOG" | grep -cx "sm_$CAP")"
    n_all="$(choices "$LOG" | wc -l)"
    if [ $RC = 0 ] && [ "$n_ok" -ge 10 ] && [ "$n_ok" = "$n_all" ] && [ "$(count_mod "$LOG" d.o "sm_$CAP")" = 1 ] &&
        [ "$(count_mod "$LOG" e.o "sm_$CAP")" = 1 ] && ! grep -q '^fatpack: \(error\|warning\)' "$LOG"; then
        pass "FATPACK_LOG=info: sm_$CAP chosen for all $n_all modules (exe + both .so)"
    else
        fail "FATPACK_LOG=info: sm_$CAP chosen everywhere" "choices: ${c:-none}; $(why "$LOG" $RC)"
        grep '^fatpack:' "$LOG" | head -20 | sed 's/^/        /'
    fi
    grep -m3 'registered' "$LOG" | sed 's/^/    /'

    if [ "$MAJ" -ge 9 ]; then
        forced="compute_$CAP"
        run_suite force_ptx "$P" FATPACK_LOG=info "FATPACK_ARCH=$forced"
        n_ok="$(choices "$LOG" | grep -cx "$forced")"
        # The device-linked module has no PTX of its own: it is JIT-linked from f1/f2's PTX.
        n_jit="$(choices "$LOG" | grep -c 'prelinked JIT')"
        n_all="$(choices "$LOG" | wc -l)"
        if [ $RC = 0 ] && [ "$n_ok" -ge 10 ] && [ $((n_ok + n_jit)) = "$n_all" ]; then
            pass "FATPACK_ARCH=$forced: PTX JIT for all $n_all modules ($n_jit via prelinked rdc PTX), suite passes"
        else
            fail "FATPACK_ARCH=$forced" "choices: $(summary_choices "$LOG"); $(why "$LOG" $RC)"
            show_failures "$LOG"
        fi
    fi

    if [ "$MAJ" != 8 ]; then
        run_suite force_sm80 "$P" FATPACK_ARCH=sm_80
        msg="$(grep -m1 '^fatpack: ' "$LOG")"
        if [ $RC -gt 0 ] && [ $RC -lt 124 ] && [ -n "$msg" ] && grep -q 'cudaError' "$LOG"; then
            pass "FATPACK_ARCH=sm_80 fails cleanly (rc=$RC): $msg"
        else
            fail "FATPACK_ARCH=sm_80 must fail cleanly" "$(why "$LOG" $RC); first fatpack line: ${msg:-none}"
        fi
        grep -m2 '^    CUDA error' "$LOG" | sed 's/^/    /'
    fi

    run_suite bad_arch "$P" FATPACK_ARCH=sm_banana
    msg="$(grep -m1 '^fatpack: error' "$LOG")"
    if [ $RC -gt 0 ] && [ $RC -lt 124 ] && echo "$msg" | grep -q 'FATPACK_ARCH'; then
        pass "FATPACK_ARCH=sm_banana fails cleanly: $msg"
    else
        fail "FATPACK_ARCH=sm_banana must fail cleanly" "$(why "$LOG" $RC); ${msg:-no fatpack error line}"
    fi

    # Repeats: the 32-thread first launch and the capture tests must not be flaky.
    bad=0
    for i in 1 2 3 4 5; do
        run_suite "repeat_$i" "$P"
        [ $RC = 0 ] || { bad=$((bad + 1)); show_failures "$LOG"; }
    done
    if [ $bad = 0 ]; then pass "packed suite passes 5 more times"; else fail "packed suite repeated" "$bad of 5 runs failed"; fi

    # Launched through the dynamic loader (some launchers and sandboxes do): /proc/self/exe
    # is then ld.so, which must not matter.
    interp="$(python3 -c 'import sys
d = open(sys.argv[1], "rb").read()
import struct
phoff, = struct.unpack_from("<Q", d, 32); n, = struct.unpack_from("<H", d, 56)
for i in range(n):
    t, _, off, _, _, sz = struct.unpack_from("<IIQQQQ", d, phoff + 56 * i)
    if t == 3: print(d[off:off + sz].rstrip(b"\0").decode())' "$P/suite")"
    mkdir -p "$T/viald"
    printf '#!/bin/sh\nexec %s %s "$@"\n' "$interp" "$P/suite" >"$T/viald/suite"
    chmod +x "$T/viald/suite"
    run_suite via_ld_so "$T/viald"
    if [ $RC = 0 ] && grep -q '^suite: [0-9]* passed, 0 failed' "$LOG"; then
        pass "launched as $interp $P/suite: $(grep -m1 '^suite:' "$LOG" | cut -d' ' -f2-)"
    else
        fail "launched through $interp" "$(why "$LOG" $RC)"
        show_failures "$LOG"
    fi

    run_suite eager "$P" FATPACK_EAGER=1
    if [ $RC = 0 ]; then pass "FATPACK_EAGER=1: suite passes"; else fail "FATPACK_EAGER=1" "$(why "$LOG" $RC)"; show_failures "$LOG"; fi
    run_suite cuda_eager "$P" CUDA_MODULE_LOADING=EAGER
    if [ $RC = 0 ]; then pass "CUDA_MODULE_LOADING=EAGER: suite passes"; else fail "CUDA_MODULE_LOADING=EAGER" "$(why "$LOG" $RC)"; show_failures "$LOG"; fi

    # Tampered stores: a copy of the packed folder with one byte of the suite's store flipped.
    tamper() { # NAME MODE [ARGS...] -> runs the damaged copy, sets RC/LOG
        local name="$1"
        shift
        rm -rf "$T/$name"
        cp -r "$P" "$T/$name"
        python3 "$TAMPER" flip "$T/$name/suite" "$@" >"$T/logs/tamper_$name.txt" 2>&1 || echo "tamper.py failed" >>"$T/logs/tamper_$name.txt"
        echo "    $(cat "$T/logs/tamper_$name.txt")"
        run_suite "tamper_$name" "$T/$name" FATPACK_LOG=info
    }
    tamper header header
    msg="$(grep -m1 '^fatpack: error' "$LOG")"
    if [ $RC -gt 0 ] && [ $RC -lt 124 ] && [ -n "$msg" ]; then
        pass "tampered store header fails cleanly (rc=$RC): $msg"
    else
        fail "tampered store header must fail cleanly" "$(why "$LOG" $RC); ${msg:-no fatpack error line}"
    fi
    tamper blob blob a.o# "$CAP"
    msg="$(grep -m1 '^fatpack: error' "$LOG")"
    a_fail="$(grep -c '^FAIL a_' "$LOG")"
    others="$(grep '^FAIL ' "$LOG" | grep -vc '^FAIL a_\|^FAIL dlclose_dyn')"
    if [ $RC -gt 0 ] && [ $RC -lt 124 ] && [ -n "$msg" ] && [ "$a_fail" -ge 1 ] && [ "$others" = 0 ]; then
        pass "tampered blob (a.o's sm_$CAP) fails cleanly, only a.o's tests fail (rc=$RC): $msg"
    else
        fail "tampered blob must fail cleanly and only for a.o" "$(why "$LOG" $RC); $a_fail a_* failed, $others others; ${msg:-no fatpack error line}"
        show_failures "$LOG"
    fi
    tamper middle middle
    msg="$(grep -m1 '^fatpack: error' "$LOG")"
    if [ $RC -lt 124 ] && { [ $RC = 0 ] || [ -n "$msg" ]; }; then
        pass "middle byte of the store flipped: no crash (rc=$RC${msg:+, $msg})"
    else
        fail "middle byte of the store flipped" "$(why "$LOG" $RC); ${msg:-no fatpack error line}"
    fi
else
    fail "runtime checks" "packed variant not built"
fi

if built ptx_only; then
    run_suite ptx_info "$O/ptx_only" FATPACK_LOG=info
    want=compute_80
    [ "$MAJ" = 8 ] && want=sm_80
    n_ok="$(choices "$LOG" | grep -cx "$want")"
    n_jit="$(choices "$LOG" | grep -c 'prelinked JIT')"
    n_all="$(choices "$LOG" | wc -l)"
    if [ $RC = 0 ] && [ "$n_ok" -ge 9 ] && [ $((n_ok + n_jit)) = "$n_all" ]; then
        pass "ptx_only FATPACK_LOG=info: $want for $n_ok modules, prelinked JIT for $n_jit (rdc), suite passes"
    else
        fail "ptx_only: $want chosen" "choices: $(summary_choices "$LOG"); $(why "$LOG" $RC)"
        show_failures "$LOG"
    fi
    grep -m1 'ptxVersion' "$LOG" | sed 's/^/  /'
fi

if built packed_side_file; then
    S="$O/packed_side_file"
    rm -rf "$T/noside" "$T/foreign"
    cp -r "$S" "$T/noside"
    rm -f "$T/noside/suite.fatpack"
    run_suite noside "$T/noside"
    msg="$(grep -m1 '^fatpack: error' "$LOG")"
    if [ $RC -gt 0 ] && [ $RC -lt 124 ] && echo "$msg" | grep -q 'suite.fatpack'; then
        pass "missing side file fails cleanly: $msg"
    else
        fail "missing side file must fail cleanly" "$(why "$LOG" $RC); ${msg:-no fatpack error line}"
    fi
    cp -r "$S" "$T/foreign"
    cp "$S/libdyn.so.fatpack" "$T/foreign/suite.fatpack"
    run_suite foreign "$T/foreign"
    msg="$(grep -m1 '^fatpack: error' "$LOG")"
    if [ $RC -gt 0 ] && [ $RC -lt 124 ] && [ -n "$msg" ]; then
        pass "foreign side file (another binary's store) fails cleanly: $msg"
    else
        fail "foreign side file must fail cleanly" "$(why "$LOG" $RC); ${msg:-no fatpack error line}"
    fi
fi

# __managed__ variables touched by host code first (static and shared cudart).
echo
echo "== managed variables before any kernel"
for m in plain packed packed_shared; do
    if ! built "managed/$m"; then fail "managed_first $m" "not built"; continue; fi
    for arg in "" init; do
        log="$T/logs/managed_${m}_${arg:-first}.log"
        FATPACK_LOG=debug timeout -k 5 60 "$O/managed/$m/managed_first" $arg >"$log" 2>&1
        rc=$?
        line="$(grep -m1 '^managed_first:' "$log")"
        if [ $rc = 0 ] && echo "$line" | grep -q PASS; then
            pass "managed_first $m${arg:+ ($arg)}: $line"
        else
            fail "managed_first $m${arg:+ ($arg)}" "rc=$rc ${line:-no result line}"
            grep '^fatpack:' "$log" | tail -n 8 | sed 's/^/        /'
        fi
    done
done

# The documented cross-library limitation: what the call made from outside returns.
if built cross_lib; then
    log="$T/logs/cross_lib.log"
    timeout -k 5 60 "$O/cross_lib/cross_lib" >"$log" 2>&1
    rc=$?
    line="$(grep -m1 '^cross_lib:' "$log")"
    if [ $rc = 0 ]; then
        pass "packed library's kernel named from the program (docs/RUNTIME.md limitation): $line"
    else
        fail "cross_lib" "rc=$rc ${line:-no result line}"
    fi
else
    fail "cross_lib" "not built"
fi

# --- 3. measurements -----------------------------------------------------------------------
echo
echo "== first_kernel measurements"
if python3 "$BENCH" "$O" "$T/logs/bench_table.txt" 9; then
    pass "first_kernel measurements (all runs checked their result)"
else
    fail "first_kernel measurements" "see above"
fi

# --- summary -------------------------------------------------------------------------------
{
    echo "fatpack GPU suite on $(grep -m1 '^device 0:' "$T/logs/suite_plain.log" 2>/dev/null || echo 'unknown device')"
    sed 's/^/  /' "$O/BUILD_INFO.txt" 2>/dev/null
    echo
    echo "suite run time (ms, one run each):"
    for v in "${VARIANTS[@]}"; do [ -n "${suite_ms[$v]:-}" ] && printf '  %-22s %s\n' "$v" "${suite_ms[$v]}"; done
    echo
    cat "$T/logs/bench_table.txt" 2>/dev/null
    echo
    printf '%s\n' "${results[@]}"
    echo
    echo "run.sh: $npass passed, $nfail failed in $((SECONDS - start)) s"
} >"$T/gpu_results.txt"
echo
echo "================ summary"
cat "$T/gpu_results.txt"
if [ -n "${OUT:-}" ] && [ -d "${OUT:-}" ]; then
    cp "$T/gpu_results.txt" "$OUT/gpu_results.txt"
    # One file for all logs (fewer files to fetch back).
    for f in "$T"/logs/*; do
        echo "==================== $(basename "$f")"
        cat "$f"
    done >"$OUT/gpu_logs.txt" 2>/dev/null
    echo "run.sh: results in \$OUT/gpu_results.txt, all logs in \$OUT/gpu_logs.txt"
fi
[ "$nfail" = 0 ]
