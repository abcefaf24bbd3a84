#!/usr/bin/env bash
# ON THE GPU MACHINE: a packed program's first launch as shipped (its modules decoded ahead
# from the program's first CUDA call on, while that call initialises the driver;
# FATPACK_AHEAD), with decoding ahead off (its stored frames handed to the driver,
# FATPACK_AHEAD=0), on the runtime's own decoding alone (FATPACK_AHEAD=0 and
# FATPACK_DECODE=runtime), eager, repacked, pruned and split for 9.0, and in tail mode
# (also pruned: the cut), against nvcc's --compress-mode=size and the plain build (also
# pruned), all in one run, interleaved. Uses tests/gpu/build.sh's first_kernel variants (OUT
# is its output folder or its .tar.xz). Prints per variant the median and spread of the first launch and of main ->
# first kernel done over RUNS runs, each as a ratio to size mode's and plain's medians, and
# one runtime log line of each packed variant (which path it took, where its time went).
# ONLY="plain size packed" keeps those variants only (plain and size always run: the ratios
# are to them), for more runs of the rows that matter in the same device time.
# HOST_MS=N: first_kernel --host-ms N, N ms of host work between its allocations and its
# launch (a program that sets up before its first kernel; default 0, the launch right after).
#   [HOST_MS=N] bash bench/h200/first_launch.sh OUT [RUNS=15]
set -euo pipefail
arg="$1"; runs="${2:-15}"
T="$(mktemp -d "${TMPDIR:-/tmp}/fatpack-handoff.XXXXXX")"
trap 'rm -rf "$T"' EXIT
if [ -f "$arg" ]; then
    tar -xf "$arg" -C "$T"
    B="$(dirname "$(dirname "$(find "$T" -path '*/bench/plain/first_kernel' | head -1)")")"
else
    B="$arg/bench"
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# name:dir:environment (VAR=VALUE,... or -)
variants="plain:plain:- size:plain_size:- packed:packed:- handoff:packed:FATPACK_AHEAD=0"
variants+=" runtime_own:packed:FATPACK_AHEAD=0,FATPACK_DECODE=runtime eager:packed:FATPACK_EAGER=1"
variants+=" release19:packed_release:- solid:packed_solid:- tail:tail:-"
# What a 9.0 machine is shipped (tests/gpu/build.sh makes them where its fatpack could):
# the packed build pruned to sm_90, split with only its sm_90 pack, the plain build pruned,
# and the tail build pruned (the cut).
variants+=" pruned:packed_pruned:- split90:packed_split90:- plain_pruned:plain_pruned:-"
variants+=" cut:tail_pruned:-"
if [ -n "${ONLY:-}" ]; then
    kept=""
    for v in $variants; do
        case " plain size $ONLY " in *" ${v%%:*} "*) kept+=" $v" ;; esac
    done
    variants=$kept
fi
args=()
[ "${HOST_MS:-0}" != 0 ] && args=(--host-ms "$HOST_MS")
echo "first_kernel ${args[*]:-(no arguments)}"
declare -A fl mk
for r in $(seq "$runs"); do
    for v in $variants; do
        IFS=: read -r name dir env <<<"$v"
        exe="$B/$dir/first_kernel"
        [ -x "$exe" ] || continue
        if [ "$env" = - ]; then line=$("$exe" "${args[@]}" 2>/dev/null | grep main_to_first_kernel_ms) || line=""
        else line=$(env ${env//,/ } "$exe" "${args[@]}" 2>/dev/null | grep main_to_first_kernel_ms) || line=""; fi
        grep -q check=PASS <<<"$line" || { echo "$name: run $r failed or wrong: $line"; exit 1; }
        fl[$name]+="$(sed 's/.*first_launch_ms=\([0-9.]*\).*/\1/' <<<"$line") "
        mk[$name]+="$(sed 's/.*main_to_first_kernel_ms=\([0-9.]*\).*/\1/' <<<"$line") "
    done
done
stats() { tr ' ' '\n' | grep . | sort -n | awk '{a[NR]=$1} END {printf "%s %s %s", a[int((NR+1)/2)], a[1], a[NR]}'; }
read -r fl_size _ _ <<<"$(stats <<<"${fl[size]}")"
read -r fl_plain _ _ <<<"$(stats <<<"${fl[plain]}")"
read -r mk_plain _ _ <<<"$(stats <<<"${mk[plain]}")"
printf '%-15s %24s %9s %9s %26s %9s\n' variant "1st launch ms (min-max)" "/ size" "/ plain" "main->1st kernel ms" "/ plain"
for v in $variants; do
    IFS=: read -r name _ _ <<<"$v"
    [ -n "${fl[$name]:-}" ] || continue
    read -r m lo hi <<<"$(stats <<<"${fl[$name]}")"
    read -r k klo khi <<<"$(stats <<<"${mk[$name]}")"
    printf '%-15s %8s (%6s-%6s) %9s %9s %10s (%6s-%6s) %9s\n' "$name" "$m" "$lo" "$hi" \
        "$(awk -v a="$m" -v b="$fl_size" 'BEGIN{printf "%.3f", a/b}')" \
        "$(awk -v a="$m" -v b="$fl_plain" 'BEGIN{printf "%.3f", a/b}')" \
        "$k" "$klo" "$khi" "$(awk -v a="$k" -v b="$mk_plain" 'BEGIN{printf "%.3f", a/b}')"
done
echo "medians of $runs interleaved runs"
for v in $variants; do
    IFS=: read -r name dir env <<<"$v"
    case $name in plain|size) continue ;; esac
    exe="$B/$dir/first_kernel"
    [ -x "$exe" ] || continue
    [ "$env" = - ] && env="FATPACK_DECODE=auto"
    echo "$name: $(env ${env//,/ } FATPACK_LOG=info "$exe" "${args[@]}" 2>&1 >/dev/null | grep -m1 'the driver\|registered' || true)"
done
# Decoding ahead, as the default packed program went: when it started, what it did, and when.
exe="$B/packed/first_kernel"
[ -x "$exe" ] && FATPACK_LOG=debug "$exe" "${args[@]}" 2>&1 >/dev/null | grep 'decoding ahead' | sed 's/^/packed: /'
true
