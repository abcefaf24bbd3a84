#!/usr/bin/env bash
# Issue 24's rows that need no GPU, in one run, from the bytes and times the shipped commands
# produce (the H200 rows: bench/h200/issue24.sh):
#   - store sizes on NVIDIA's PyPI libraries (libcublasLt.so, libcusparse.so) against nvcc's
#     --compress-mode=size on the same entries: `fatpack ld` (default), `fatpack repack
#     --level 19`, `--release` (8 MiB groups), `--release --group-mib 32`
#     (bench/store_shipped.sh), and xz -9e over the entries of `fatpack ld`'s store as
#     `fatpack extract` writes them (the limit);
#   - the link of uncompressed device code on this machine's cores: 1,300 MiB of cuBLASLt's
#     SASS in 16 objects, plain ld against `fatpack ld` (default level 9) and
#     `--fatpack-level=5`, wall and peak RSS (bench/link_time.sh, 3 rounds), and 2,600 MiB
#     (one round; plain ld cannot link it) to show how the peak grows with device code.
#
#   bash bench/issue24_dev.sh [WORK=/tmp/fatpack-issue24]      (about 70 min on 2 CPUs)
#
# The links run first, on an otherwise idle machine: their times are the row. The store
# commands' seconds are informational.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-/tmp/fatpack-issue24}"
mkdir -p "$work"
log="$work/log"
mkdir -p "$log"
echo "issue 24, dev-machine rows: fatpack $(git -C "$root" rev-parse --short HEAD), $(nproc) CPUs, $(date -u +%Y-%m-%d)"

# The wheels (the venv bench/store_shipped.sh uses too).
[ -x "$work/venv/bin/python" ] || python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q --no-deps nvidia-cublas nvidia-cusparse
site="$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
lt="$(find "$site/nvidia" -name 'libcublasLt.so.*' -type f | sort | head -1)"
sp="$(find "$site/nvidia" -name 'libcusparse.so.*' -type f | sort | head -1)"

echo
echo "== link, 1300 MiB of $(basename "$lt")'s SASS in 16 objects, uncompressed, 3 rounds"
VARIANTS="plain packed level5" RUNS=3 bash "$root/bench/link_time.sh" 1300 16 "$work/link1300" "$lt" |
    grep -v '^verbose: fatpack:   rewrote' | tee "$log/link1300.txt"
rm -rf "$work/link1300"
echo
echo "== link, 2600 MiB of the same, 1 round (plain ld cannot link past 2 GiB)"
VARIANTS="plain packed" RUNS=1 bash "$root/bench/link_time.sh" 2600 16 "$work/link2600" "$lt" |
    grep -v '^verbose: fatpack:   rewrote' | tee "$log/link2600.txt"
rm -rf "$work/link2600"

echo
echo "== stores (bench/store_shipped.sh)"
bash "$root/bench/store_shipped.sh" "$work" "level19 release release-32" | tee "$log/shipped.txt"

echo
echo "== xz -9e over the entries of fatpack ld's store (the limit), as fatpack extract writes them"
for f in "$lt" "$sp"; do
    x="$work/extract-$(basename "$f")"
    rm -rf "$x"
    # The packed program bench/store_shipped.sh linked from the library's containers: the
    # same entries as every row (not the PTX cuBLASLt embeds in its own data, which no link
    # stores).
    packed="$work/$(basename "$f" | sed 's/\.so\..*/.so/')/packed"
    "$root/target/release/fatpack" extract "$packed" -o "$x" >/dev/null
    n=$(find "$x" -type f \( -name '*.cubin' -o -name '*.ptx' \) -print0 | sort -z | xargs -0 cat | xz -9e -T0 | wc -c)
    echo "$(basename "$f") xz: $n" | tee -a "$log/xz.txt"
    rm -rf "$x"
done

python3 - "$log" <<'PY'
import os, re, sys
log = sys.argv[1]
shipped = open(os.path.join(log, "shipped.txt")).read()
xz = dict(re.findall(r"^(\S+) xz: (\d+)", open(os.path.join(log, "xz.txt")).read(), re.M))
print("\nissue 24, dev-machine rows (this run)")
print(f"{'measure':<64} {'anchor':>12} {'fatpack':>12} {'ratio':>7}")
for block in shipped.split("\n== ")[1:]:
    lib = block.split(":")[0].strip()
    size = re.search(r"nvcc `--compress-mode=size` .*? \| ([\d.]+) \|", block)
    size = float(size.group(1)) if size else None
    for label, pat in (("fatpack ld (default)", r"`fatpack ld` \(default\) \| ([\d.]+)"),
                       ("repack --level 19", r"repack --level 19` \| ([\d.]+)"),
                       ("repack --release (8 MiB)", r"repack --release` \| ([\d.]+)"),
                       ("repack --release --group-mib 32", r"repack --release --group-mib 32` \| ([\d.]+)")):
        m = re.search(pat, block)
        if m and size:
            v = float(m.group(1))
            print(f"{'store MiB, ' + lib + ', ' + label:<64} {size:>12.2f} {v:>12.2f} {v / size:>7.3f}")
    n = xz.get(lib)
    if n and size:
        v = int(n) / 2**20
        print(f"{'store MiB, ' + lib + ', xz -9e over the entries (limit)':<64} {size:>12.2f} {v:>12.2f} {v / size:>7.3f}")
def rows(name):
    out = {}
    for line in open(os.path.join(log, name)):
        m = re.match(r"\| (plain ld|fatpack ld[^|]*?) \| ([\d.]+) .*?\| ([\d.x]*) \| (\d+) \|", line)
        if m:
            out[m.group(1)] = (float(m.group(2)), int(m.group(4)))
    return out
for name, mib in (("link1300.txt", 1300), ("link2600.txt", 2600)):
    r = rows(name)
    plain = r.get("plain ld")
    for label in ("fatpack ld (packed)", "fatpack ld --fatpack-level=5"):
        if label in r:
            t, rss = r[label]
            anchor = f"{plain[0]:>10.2f} s" if plain else f"{'-':>12}"
            ratio = f"{t / plain[0]:>7.3f}" if plain else f"{'-':>7}"
            print(f"{f'link s, {mib} MiB uncompressed, ' + label:<64} {anchor} {t:>10.2f} s {ratio}")
            prss = f"{plain[1]:>8} MiB" if plain else f"{'-':>12}"
            rr = f"{rss / plain[1]:>7.3f}" if plain else f"{'-':>7}"
            print(f"{f'peak RSS, {mib} MiB uncompressed, ' + label:<64} {prss} {rss:>8} MiB {rr}")
PY
