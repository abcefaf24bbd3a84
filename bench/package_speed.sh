#!/usr/bin/env bash
# Time and size of `fatpack prune --for 9.0` of one library packaged every way fatpack
# rewrites (wheel, .conda, .tar.bz2, gzip deb, xz deb), at `--compression fast` (default)
# and `best`, ROUNDS rounds each (the median printed), against the wheel's time.
# LIB: a fat library, e.g. nvidia-curand-cu12's libcurand.so.10 from PyPI.
#
#   bash bench/package_speed.sh FATPACK LIB [ROUNDS=3]
set -euo pipefail
bin="$(realpath "$1")"; lib="$(realpath "$2")"; rounds="${3:-3}"
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --disable-pip-version-check zstandard==0.23.0
make() { "$work/venv/bin/python" "$root/tests/it/packages/big.py" "$work/$1" "$2" elf 0 "$lib"; }
declare -A pkg
pkg[wheel]="$(make wheel wheel)"
pkg[conda]="$(make conda conda)"
pkg[tarbz2]="$(make tarbz2 tarbz2)"
pkg[deb-gzip]="$(make deb deb)"
# dpkg-deb's own default: xz level 6.
mkdir -p "$work/xzdeb"
dpkg-deb -R "${pkg[deb-gzip]}" "$work/xzroot"
dpkg-deb -Zxz -z6 --root-owner-group -b "$work/xzroot" "$work/xzdeb/libcut1_1.0-1_amd64.deb" >/dev/null
pkg[deb-xz]="$work/xzdeb/libcut1_1.0-1_amd64.deb"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
wheel_s=""
printf '%-10s %-6s %10s %12s %12s %8s\n' format level input_B output_B median_s x_wheel
for effort in fast best; do
    for f in wheel conda tarbz2 deb-gzip deb-xz; do
        [ "$f" = wheel ] && [ "$effort" = best ] && continue
        p="${pkg[$f]}"
        times=""
        for r in $(seq "$rounds"); do
            rm -rf "$work/out"
            t0=$(date +%s.%N)
            "$bin" prune --compression "$effort" --for 9.0 "$p" -o "$work/out" 2>/dev/null
            times+="$(echo "$(date +%s.%N) - $t0" | bc)"$'\n'
        done
        m="$(printf '%s' "$times" | median)"
        [ "$f" = wheel ] && wheel_s="$m"
        out="$(stat -c %s "$work"/out/*)"
        printf '%-10s %-6s %10s %12s %12.2f %8.2f\n' "$f" "$effort" "$(stat -c %s "$p")" "$out" \
            "$m" "$(echo "$m / $wheel_s" | bc -l)"
    done
done
