#!/usr/bin/env bash
# The over-2gib case for aarch64, link only (Debian's cross binutils; nothing runs):
# plain ld must fail with `relocation truncated to fit: R_AARCH64_PREL32`, fatpack ld must
# link it (packed, with the aarch64 runtime fatpack carries) and so must tail mode.
#   bash examples/over-2gib/run-aarch64.sh [TOTAL_MIB=2300] [OBJECTS=24] [WORKDIR]
# Needs: apt-get install binutils-aarch64-linux-gnu gcc-aarch64-linux-gnu, and the Rust
# target: rustup target add aarch64-unknown-linux-gnu.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
total="${1:-2300}"; objects="${2:-24}"
work="${3:-$(mktemp -d)}"
cd "$root"
# A fatpack that carries an aarch64 runtime besides its own (build.rs, the one recipe).
CC_aarch64_unknown_linux_gnu=aarch64-linux-gnu-gcc AR_aarch64_unknown_linux_gnu=aarch64-linux-gnu-ar \
    FATPACK_RT_EXTRA_TARGETS=aarch64-unknown-linux-gnu \
    cargo build --release --locked -q -p fatpack --example over-2gib
"$root/target/release/fatpack" --version
mkdir -p "$work"
echo "== generating ${total} MiB over ${objects} aarch64 objects in $work"
OVER2GIB_ARCH=aarch64 ./target/release/examples/over-2gib "$work" "$total" "$objects" \
    tests/fixtures/nvcc13/big_kernels_all.o tests/fixtures/nvcc13/kernels_all.o tests/fixtures/nvcc13/other.o
cd "$work"
ls obj*.s | xargs -P "$(nproc)" -I{} sh -c 'aarch64-linux-gnu-as -o "$(basename {} .s).o" {}'
rm -f obj*.s obj*.fatbin
objs="$(ls obj*.o | sort -V | tr '\n' ' ')"
echo "== plain aarch64-linux-gnu-ld -shared"
if aarch64-linux-gnu-ld -shared -o libbig_plain.so $objs 2> plain.err; then
    echo "FAIL: plain ld linked more than 2 GiB of device code" >&2; exit 1
fi
grep -m1 'relocation truncated to fit: R_AARCH64_PREL32' plain.err
echo "plain ld failed as expected ($(grep -c 'relocation truncated' plain.err) truncated relocations)"
echo "== fatpack ld -shared (packed)"
FATPACK_REAL_LD=aarch64-linux-gnu-ld \
    "$root/target/release/fatpack" ld --fatpack-verbose -shared -o libbig_packed.so $objs 2> packed.err || { cat packed.err; exit 1; }
if grep 'R_AARCH64_PREL32' packed.err; then echo "truncated relocations left (packed.err)" >&2; exit 1; fi
grep '^fatpack: libbig' packed.err
"$root/target/release/fatpack" inspect --json libbig_packed.so > inspect.json
python3 - "$objects" <<'PY'
import json, sys
r = json.load(open("inspect.json"))[0]
assert r["packed"]["digest_matches"], "digest mismatch"
assert len(r["modules"]) == int(sys.argv[1]), len(r["modules"])
n = sum(len(m["entries"]) for m in r["modules"])
print(f"packed aarch64 library: {len(r['modules'])} modules, {n} entries, "
      f"{r['totals']['raw_size']/2**30:.2f} GiB raw in a {r['packed']['store_size']/2**20:.1f} MiB store")
PY
aarch64-linux-gnu-readelf -h libbig_packed.so | grep -m1 Machine
rm -f libbig_packed.so
echo "== fatpack ld -shared --fatpack-mode=tail"
FATPACK_REAL_LD=aarch64-linux-gnu-ld "$root/target/release/fatpack" ld --fatpack-mode=tail -shared -o libbig_tail.so $objs 2> tail.err || { cat tail.err; exit 1; }
if grep 'R_AARCH64_PREL32' tail.err; then echo "truncated relocations left (tail.err)" >&2; exit 1; fi
aarch64-linux-gnu-readelf -lW libbig_tail.so | grep -A20 'Section to Segment' | grep -E 'nv_fatbin|bss'
echo "over-2gib aarch64: OK"
