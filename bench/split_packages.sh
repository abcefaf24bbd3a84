#!/usr/bin/env bash
# Sizes and times of `fatpack split` of one packed binary packaged every way fatpack splits
# (wheel, .conda, .tar.bz2, deb): the fat package, the host, the sm90 device package, host +
# sm90 and every package against the fat one, split's wall time, ROUNDS rounds (median).
# BIN: a program or library fatpack packed (e.g. cuda-samples' reduction linked through
# `FATPACK_MODE=packed fatpack run -- nvcc ...`).
#
#   bash bench/split_packages.sh FATPACK BIN [ROUNDS=3]
set -euo pipefail
bin="$(realpath "$1")"; packed="$(realpath "$2")"; rounds="${3:-3}"
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check zstandard==0.23.0
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { python3 -c "print(f'{$1 / $2:.3f}')"; }
printf '%-8s %10s %10s %10s %10s %10s %8s\n' format fat_B host_B sm90_B host+sm90 everything split_s
for f in wheel conda tarbz2 deb; do
    pkg="$("$work/venv/bin/python" "$root/tests/it/packages/big.py" "$work/$f" "$f" elf 0 "$packed")"
    times=""
    for r in $(seq "$rounds"); do
        rm -rf "$work/out"
        t0=$(date +%s.%N)
        "$bin" split "$pkg" --into "$work/out" 2>/dev/null
        times+="$(echo "$(date +%s.%N) - $t0" | bc)"$'\n'
    done
    host=$(ls "$work"/out/*host* | head -1)
    dev=$(ls "$work"/out/* | grep -E '[-_]sm90[-_]' | head -1)
    every=0
    for p in "$work"/out/*; do
        case "$(basename "$p")" in
            *_h0_0_*|*-linux_x86_64-*) ;; # variants: a few hundred bytes, alternatives
            *) every=$((every + $(stat -c %s "$p"))) ;;
        esac
    done
    fat=$(stat -c %s "$pkg")
    hs=$(( $(stat -c %s "$host") + $(stat -c %s "$dev") ))
    printf '%-8s %10s %10s %10s %10s %10s %8.2f\n' "$f" "$fat" "$(stat -c %s "$host")" \
        "$(stat -c %s "$dev")" "$(ratio $hs $fat)" "$(ratio $every $fat)" \
        "$(printf '%s' "$times" | median)"
done
