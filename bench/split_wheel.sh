#!/usr/bin/env bash
# Sizes of what `fatpack split` makes of a wheel whose libraries fatpack packed, against the
# wheel itself: the host wheel, each device wheel, host + one device wheel, and the small
# project and variant wheels; and the split's time.
#
#   bash bench/split_wheel.sh FATPACK FAT.whl
set -euo pipefail
fatpack="$1"; fat="$2"
out="$(mktemp -d)"; trap 'rm -rf "$out"' EXIT
start=$(date +%s.%N)
"$fatpack" split "$fat" --into "$out/dist" 2>/dev/null
end=$(date +%s.%N)
fat_len=$(stat -c %s "$fat")
printf '%-52s %12s %8s\n' wheel bytes "x fat"
printf '%-52s %12d %8s\n' "$(basename "$fat") (input)" "$fat_len" 1.000
host=$(ls "$out"/dist/*_host-*.whl)
host_len=$(stat -c %s "$host")
for w in "$out"/dist/*.whl; do
  len=$(stat -c %s "$w")
  printf '%-52s %12d %8.3f\n' "$(basename "$w")" "$len" "$(echo "$len / $fat_len" | bc -l)"
done
for w in "$out"/dist/*_sm*.whl "$out"/dist/*_compute*.whl; do
  [ -e "$w" ] || continue
  [[ "$w" == "$host" ]] && continue
  len=$(( host_len + $(stat -c %s "$w") ))
  printf '%-52s %12d %8.3f\n' "host + $(basename "$w" | cut -d- -f1)" "$len" "$(echo "$len / $fat_len" | bc -l)"
done
echo "split: $(echo "$end - $start" | bc) s"
