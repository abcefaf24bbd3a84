# The measuring step of bench/prune_real.sh (here) and bench/h200/prune/run.sh (on the GPU
# machine): `measure NAME INPUT ARGS...` runs `$F prune ARGS INPUT -o $W/last` and prints one
# row: file size before and after, du after, device bytes before and after (prune's report),
# wall time, peak memory, and readelf's (and eu-elflint's, where installed) complaints about
# the output that it does not make about the input. Needs F (the fatpack binary) and W (a scratch folder).
row() { printf '%-26s %-14s %11s %11s %11s %12s %12s %7s %8s %s\n' "$@"; }
row file mode "size MB" "after MB" "du MB" "device B" "kept B" "secs" "peak MB" "readelf"
# measure NAME INPUT ARGS...: one prune, one row; the output stays as $W/last.
measure() {
  local name=$1 in=$2; shift 2
  rm -f "$W/last"
  if ! /usr/bin/time -f "%e %M" -o "$W/time" "$F" prune "$@" "$in" -o "$W/last" 2>"$W/log"; then
    echo "FAILED: prune $* $name: $(tail -2 "$W/log")"; return 1
  fi
  local secs kb; read -r secs kb < "$W/time"
  local dev; dev=$(grep -o 'device code [0-9]* -> [0-9]*' "$W/log" | awk '{print $3, $5}')
  # readelf's warnings about the output that it does not give about the input
  local warn; warn=$(comm -13 <(readelf -aW "$in" 2>&1 >/dev/null | sort -u) \
    <(readelf -aW "$W/last" 2>&1 >/dev/null | sort -u) | head -c 60)
  # ... and eu-elflint's (--gnu-ld), where elfutils is installed
  if command -v eu-elflint >/dev/null; then
    # (segment numbers shift by the one the cut adds: compared without them)
    local lint; lint=$(comm -13 <(eu-elflint --gnu-ld "$in" 2>&1 | sed -E "s|$in|F|g; s/segment \[[0-9]+\]/segment/g" | sort -u) \
      <(eu-elflint --gnu-ld "$W/last" 2>&1 | sed -E "s|$W/last|F|g; s/segment \[[0-9]+\]/segment/g" | sort -u) | head -c 60)
    warn="$warn${lint:+ elflint: $lint}"
  fi
  local mb='{printf "%.1f", $1/1e6}'
  row "$name" "$*" "$(stat -c %s "$in" | awk "$mb")" "$(stat -c %s "$W/last" | awk "$mb")" \
    "$(du -B1 "$W/last" | cut -f1 | awk "$mb")" $dev "$secs" "$((kb / 1024))" "${warn:-clean}"
  # The report's lines are wrapped: read it as one line.
  local text; text=$(sed 's/^fatpack prune: *//' "$W/log" | tr '\n' ' ')
  if grep -q 'keeps its size' <<<"$text"; then
    echo "  (in place: $(grep -o 'cut out of it (.*), so' <<<"$text" | head -c 160))"
  fi
  if grep -q 'stays where it is' <<<"$text"; then
    echo "  (stays: $(grep -o '[^ ]* stays where it is, pruned in place: .*' <<<"$text" | head -c 200))"
  fi
  return 0
}
