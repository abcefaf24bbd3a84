#!/usr/bin/env bash
# What each GPU needs after `fatpack split`, per capability: the packs its runtime reads (as
# split reports them) and their total bytes, for each packed binary given (e.g. a library's
# default link and its release store, from bench/store_shipped.sh with KEEP=1).
#
#   bash bench/split_needs.sh BINARY...
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
fatpack="$root/target/release/fatpack"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for bin in "$@"; do
    name="$(basename "$bin")"
    out="$work/$name"
    "$fatpack" split "$bin" --into "$out" >"$work/$name.txt" 2>&1
    host=$(stat -c %s "$out/$name")
    echo "== $bin: host $host bytes; packs: $(cd "$out" && ls *.fatpack | sed "s/^$name//" | tr '\n' ' ')"
    echo "| capability | packs | pack bytes |"
    echo "|---|---|---:|"
    sed -n "s/^fatpack split: a GPU of compute capability \([0-9.]*\) loads from \(.*\)$/\1 \2/p" "$work/$name.txt" |
        while read -r cap packs; do
            total=0
            for p in ${packs//,/ }; do total=$((total + $(stat -c %s "$out/$p"))); done
            echo "| $cap | ${packs//$name/} | $total |"
        done
done
