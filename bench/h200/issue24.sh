#!/usr/bin/env bash
# ON THE GPU MACHINE: issue 24's H200 rows in one run, from what fatpack writes:
#   - link time against plain ld, static cuBLAS program and five static libraries (5
#     interleaved rounds: bench/h200/link_routes.sh; the default route and both forced ones);
#   - packed file against plain, static cuBLAS program (the same links);
#   - first launch against plain and nvcc's --compress-mode=size, and exec -> first kernel,
#     on the GPU suite's first_kernel program (64 kernels; tests/gpu/run.sh, median of 9).
# Prints the rows as one table after the two scripts' own output.
#   [WHO="plain copy late direct"] bash bench/h200/issue24.sh FATPACK GPU_SUITE.tar.xz
#   (tests/gpu/build.sh makes the suite; WHO and ROUNDS pass to link_routes.sh)
set -u
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
FP="$(realpath "$1")"
SUITE="$(realpath "$2")"
R="$(mktemp -d "${TMPDIR:-/tmp}/fatpack-issue24.XXXXXX")"
trap 'rm -rf "$R"' EXIT
OUT="$R" bash "$root/tests/gpu/run.sh" "$SUITE" >"$R/gpu.txt" 2>&1
echo "tests/gpu/run.sh: $(tail -n 3 "$R/gpu.txt" | grep 'passed')"
bash "$root/bench/h200/link_routes.sh" "$FP" | tee "$R/routes.txt"
python3 - "$R/routes.txt" "$R/gpu_results.txt" <<'PY'
import re, sys
routes, gpu = open(sys.argv[1]).read(), open(sys.argv[2]).read()
def median(prog, who):
    m = re.search(rf"^{prog}: {who} .* ([\d.]+) +([\d.]+)  rc", routes, re.M)
    return (float(m.group(1)), float(m.group(2))) if m else (None, None)
def size(prog, who):
    m = re.search(rf"^{prog} {who}: rc \d+ .*?(\d+) bytes", routes, re.M)
    return int(m.group(1)) if m else None
def auto(prog):
    m = re.search(rf"^{prog} auto: route: (\w+)", routes, re.M)
    return m.group(1) if m else "?"
def first(variant):
    m = re.search(rf"^{re.escape(variant)} +([\d.]+) +([\d.]+) ±\d+ +([\d.]+) ±\d+ +([\d.]+) ±", gpu, re.M)
    return tuple(float(x) for x in m.groups()) if m else None
print("\nissue 24, H200 rows (this run)")
print(f"{'measure':<58} {'anchor':>14} {'fatpack':>14} {'ratio':>7}")
for prog, name in (("cublas", "static cuBLAS program"), ("five", "five static libraries")):
    plain, _ = median(prog, "plain")
    for who in ("direct", "late", "copy"):
        t, r = median(prog, who)
        tag = f"{who} route" + (" (default)" if auto(prog) == who else "")
        if who == "late":
            tag = "direct route, link started after the scan"
        if t is not None:
            print(f"{'link, ' + name + ', ' + tag:<58} {plain:>12.2f} s {t:>12.2f} s {r:>7.3f}")
p, d = size("cublas", "plain"), size("cublas", auto("cublas"))
if p and d:
    print(f"{'file size, static cuBLAS program (default route)':<58} {p:>14} {d:>14} {d / p:>7.3f}")
plain, size_mode, packed = first("plain"), first("plain, nvcc --compress-mode=size"), first("packed")
if plain and size_mode and packed:
    print(f"{'first launch ms, first_kernel (vs nvcc size mode)':<58} {size_mode[3]:>14.2f} {packed[3]:>14.2f} {packed[3] / size_mode[3]:>7.3f}")
    print(f"{'first launch ms, first_kernel (vs plain)':<58} {plain[3]:>14.2f} {packed[3]:>14.2f} {packed[3] / plain[3]:>7.3f}")
    print(f"{'exec -> exit ms, first_kernel (vs plain)':<58} {plain[1]:>14.1f} {packed[1]:>14.1f} {packed[1] / plain[1]:>7.3f}")
    print(f"{'main -> first kernel done ms, first_kernel (vs plain)':<58} {plain[2]:>14.1f} {packed[2]:>14.1f} {packed[2] / plain[2]:>7.3f}")
PY
