#!/usr/bin/env bash
# Per-GPU packages on the H200, installed by real installers and run. NVIDIA's cuSPARSE as
# the machine has it installed (PyTorch's dependency, nvidia-cusparse from PyPI) made into a
# wheel (packages/rewheel.py) and a conda package (tests/it/packages/make_conda.py), pruned
# for 9.0 by fatpack; then:
#   - pip installs the local-label variant from its per-variant index (`fatpack index`) and
#     the fat wheel from the generic one; variantlib's resolution picks the PEP 825 variant
#     for this GPU;
#   - py-rattler solves the conda channel (cuda-arch, fat, variant) for this machine's
#     __cuda_arch and
#     installs;
#   - NVIDIA's cuBLAS wheel the same way (local-label variant, per-variant index), and every
#     cuBLASLt algorithm (bench/h200/prune/cublaslt_algos.cu) on the fat and pruned wheels;
#   - a cuSPARSE program (packages/cusparse_check.cu: SpMV, SpMM, SpSV against the CPU) runs
#     on each installed library, and the pruned ones' results are compared with the fat one's
#     byte for byte.
# Carried: target/release/fatpack, .device/wheels (py-rattler, conda-package-handling,
# variantlib and their dependencies, for Python 3.12; the machine reaches no registry).
#   bash bench/h200/packages.sh
set -uo pipefail
root=$PWD
F=$root/target/release/fatpack
here=$root/bench/h200/packages
W=/tmp/pkg-bench
rm -rf "$W" && mkdir -p "$W/dist" "$W/channel/linux-64"
PY=/opt/torch/.venv/bin/python
[ -x "$PY" ] || PY=python3
SITE=$($PY -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
CUDA=${CUDA_HOME:-/usr/local/cuda}
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1)
echo "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), capability $cap, $(nproc) CPUs; $($PY --version)"
$PY -m venv "$W/tools" && "$W/tools/bin/pip" install -q --no-index --find-links "$root/.device/wheels" \
  py-rattler conda-package-handling variantlib || { echo "tools venv failed"; exit 1; }
info=$(ls -d "$SITE"/nvidia_cusparse-*.dist-info | head -1)
[ -n "$info" ] || { echo "no nvidia_cusparse in $SITE"; exit 1; }
wheel=$("$W/tools/bin/python" "$here/rewheel.py" "$info" "$W/dist") || exit 1
echo "wheel: $(basename "$wheel") ($(stat -c %s "$wheel") bytes)"
t() { /usr/bin/time -f "%e s, peak %M KB" "$@"; }
t "$F" prune --for 9.0 "$wheel" -o "$W/dist" 2>&1 | grep -E "wrote|serves| s, peak"
t "$F" prune --for 9.0 --local-label "$wheel" -o "$W/dist" 2>&1 | grep -E "wrote|serves| s, peak"
ls -la "$W/dist" | awk 'NR>1 {print "  " $5, $NF}'
"$F" index "$W/dist" -o "$W/site" 2>/dev/null || exit 1
"$W/tools/bin/variantlib" generate-index-json -d "$W/dist" >/dev/null 2>&1
gpu=${cap/./}
echo "variantlib picks for this GPU ($gpu): $("$W/tools/bin/python" "$root/tests/it/packages/resolve_variant.py" "$W"/dist/*-variants.json "$gpu")"
name=$(basename "$wheel" | cut -d- -f1)
"$W/tools/bin/pip" install -q --no-deps --target "$W/fat" --index-url "file://$W/site/simple" "$name" || exit 1
"$W/tools/bin/pip" install -q --no-deps --target "$W/sm90" --index-url "file://$W/site/sm90/simple" "$name" || exit 1
ls "$W/fat" "$W/sm90" | grep dist-info
# The same library as a conda package in a local channel, its variant beside it.
lib=$(find "$W/fat" -name 'libcusparse.so.*' -type f | head -1)
cat > "$W/spec.json" <<JSON
{"out": "$W/channel/linux-64", "name": "cusparse", "version": "12", "files": [
 {"path": "lib/$(basename "$lib")", "file": "$lib", "mode": 493}]}
JSON
fat_conda=$("$W/tools/bin/python" "$root/tests/it/packages/make_conda.py" "$W/spec.json") || exit 1
# The `cuda-arch` metapackage as conda-forge publishes it, one per capability.
for v in 7.5 8.0 8.6 8.9 9.0 10.0 12.0; do
  echo "{\"out\": \"$W/channel/linux-64\", \"name\": \"cuda-arch\", \"version\": \"$v\", \"build\": \"0\", \"files\": [], \"constrains\": [\"__cuda_arch $v\"]}" > "$W/meta.json"
  "$W/tools/bin/python" "$root/tests/it/packages/make_conda.py" "$W/meta.json" >/dev/null || exit 1
done
t "$F" prune --for 9.0 "$fat_conda" -o "$W/channel/linux-64" 2>&1 | grep -E "wrote|serves| s, peak"
echo "py-rattler solves for __cuda_arch $cap: $("$W/tools/bin/python" "$root/tests/it/packages/solve_conda.py" "$W/channel" cusparse "$cap" "$W/conda")"
echo "py-rattler solves for __cuda_arch 8.0: $("$W/tools/bin/python" "$root/tests/it/packages/solve_conda.py" "$W/channel" cusparse 8.0)"
for d in fat sm90; do
  f=$(find "$W/$d" -name 'libcusparse.so.*' -type f | head -1)
  echo "  $d: $(stat -c %s "$f") bytes, du $(du -B1 "$f" | cut -f1)"
done
f=$(find "$W/conda/lib" -name 'libcusparse.so.*' -type f | head -1)
echo "  conda: $(stat -c %s "$f") bytes, du $(du -B1 "$f" | cut -f1)"
# The program, on each installed library (nvJitLink and the rest from the site's nvidia/).
nvcc -O2 -arch=sm_90 -o "$W/check" "$here/cusparse_check.cu" -lcusparse || exit 1
deps=$(dirname "$(find "$SITE/nvidia" -name 'libnvJitLink.so.*' | head -1)")
status=0
for d in fat sm90 conda; do
  libdir=$(dirname "$(find "$W/$d" -name 'libcusparse.so.*' -type f | head -1)")
  echo "== $d ($libdir)"
  LD_LIBRARY_PATH=$libdir:$deps ldd "$W/check" | grep cusparse
  LD_LIBRARY_PATH=$libdir:$deps "$W/check" "$W/$d.bin" || status=1
done
for d in sm90 conda; do
  cmp "$W/fat.bin" "$W/$d.bin" && echo "$d: results identical to the fat library's ($(stat -c %s "$W/fat.bin") bytes)" || status=1
done

# NVIDIA's cuBLAS wheel, whose cuBLASLt keeps 299 fatbins in .cask_resource (they move with
# the device code): the local-label variant from its per-variant index beside the fat wheel
# from the generic one, and every cuBLASLt algorithm of bench/h200/prune/cublaslt_algos.cu
# on each.
echo "== nvidia-cublas"
cinfo=$(ls -d "$SITE"/nvidia_cublas-*.dist-info | head -1)
mkdir -p "$W/cdist"
cwheel=$("$W/tools/bin/python" "$here/rewheel.py" "$cinfo" "$W/cdist") || exit 1
echo "wheel: $(basename "$cwheel") ($(stat -c %s "$cwheel") bytes)"
t "$F" prune --for 9.0 --local-label "$cwheel" -o "$W/cdist" 2>&1 | grep -E "wrote|serves|stays| s, peak"
ls -la "$W/cdist" | awk 'NR>3 {print "  " $5, $NF}'
"$F" index "$W/cdist" -o "$W/csite" 2>/dev/null || exit 1
cname=$(basename "$cwheel" | cut -d- -f1)
"$W/tools/bin/pip" install -q --no-deps --target "$W/cfat" --index-url "file://$W/csite/simple" "$cname" || exit 1
"$W/tools/bin/pip" install -q --no-deps --target "$W/c90" --index-url "file://$W/csite/sm90/simple" "$cname" || exit 1
ls "$W/cfat" "$W/c90" | grep dist-info
nvcc -O2 -arch=sm_90 -o "$W/lt_algos" "$root/bench/h200/prune/cublaslt_algos.cu" -lcublasLt || exit 1
for d in cfat c90; do
  f=$(find "$W/$d" -name 'libcublasLt.so.*' -type f | head -1)
  echo "  $d: libcublasLt $(stat -c %s "$f") bytes, du $(du -B1 "$f" | cut -f1)"
  LD_LIBRARY_PATH=$(dirname "$f"):$deps "$W/lt_algos" "$W/$d.bin" > "$W/$d.txt" || { cat "$W/$d.txt"; status=1; }
  tail -1 "$W/$d.txt"
done
cmp "$W/cfat.bin" "$W/c90.bin" && echo "c90: cuBLASLt results identical to the fat wheel's ($(stat -c %s "$W/cfat.bin") bytes)" || status=1
exit $status
