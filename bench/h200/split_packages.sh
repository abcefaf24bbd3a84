#!/usr/bin/env bash
# One fat build split into host + device packages, installed by the real installers on the
# GPU machine and run, against the fat package, bit for bit (issue 55):
#   - a PyTorch extension (split_packages/ext: four kernels over float, double, half), built
#     here by `pip wheel` through `fatpack run` with packing forced for 7.5-12.0 + PTX;
#   - NVIDIA's cuda-samples `reduction`, linked through fatpack on the dev machine (packing
#     forced, sm_75-sm_120 + compute_120), and the same build by plain nvcc, carried in
#     .device/reduction; made into a wheel and a conda package here.
# Each fat package is split (`fatpack split`); pip installs `X-host[sm90]` (extras) and the
# project (everything); py-rattler solves the conda channel with its own detection of this
# machine's GPU (`__cuda_arch`) and installs; the host alone must stop with the line that
# names the package and its install command. Prints sizes (host + sm90 against the fat
# package) and one line per run.
# Carried: target/release/fatpack, .device (wheels for Python 3.12: py-rattler,
# conda-package-handling, setuptools, wheel; the reduction binaries).
#   bash bench/h200/split_packages.sh
set -uo pipefail
root=$PWD
F=$root/target/release/fatpack
here=$root/bench/h200/split_packages
W=/tmp/split-packages
rm -rf "$W" && mkdir -p "$W/dist" "$W/split" "$W/channel/linux-64"
PY=/opt/torch/.venv/bin/python
[ -x "$PY" ] || PY=python3
cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1)
echo "machine: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), capability $cap, $(nproc) CPUs; $($PY --version); torch $($PY -c 'import torch; print(torch.__version__)')"
python3 -m venv "$W/tools" && "$W/tools/bin/pip" install -q --no-index --find-links "$root/.device/wheels" \
  py-rattler conda-package-handling || { echo "tools venv failed"; exit 1; }
TPY=$W/tools/bin/python
status=0
fail() { echo "FAIL: $*"; status=1; }
size() { stat -c %s "$1"; }
ratio() { python3 -c "print(f'{$1 / $2:.3f}')"; }

# --- the PyTorch extension wheel -------------------------------------------------------
cp -r "$here/ext" "$W/ext"
( cd "$W/ext" && FATPACK_MODE=packed TORCH_CUDA_ARCH_LIST="7.5;8.0;8.6;9.0;10.0;12.0+PTX" \
    MAX_JOBS=8 "$F" run -- "$PY" -m pip wheel -q --no-build-isolation --no-deps -w "$W/dist" . ) \
  > "$W/build.log" 2>&1 || { tail -30 "$W/build.log"; echo "FAIL: extension build"; exit 1; }
ext_whl=$(ls "$W"/dist/cutext-*.whl)
echo "extension wheel: $(basename "$ext_whl") $(size "$ext_whl") bytes"
mkdir -p "$W/peek" && (cd "$W/peek" && python3 -m zipfile -e "$ext_whl" .)
so=$(find "$W/peek" -name '_C*.so' | head -1)
"$F" inspect "$so" | head -3

# --- the reduction sample as a wheel and a conda package -------------------------------
red=$root/.device/reduction
cat > "$W/red.json" <<JSON
{"wheel": "$W/dist/cutred-1.0-py3-none-linux_x86_64.whl", "dist": "cutred", "version": "1.0",
 "members": [{"name": "cutred/reduction", "file": "$red/reduction_packed", "mode": 493}]}
JSON
python3 "$root/tests/it/packages/make_wheel.py" "$W/red.json" || fail "reduction wheel"
red_whl=$W/dist/cutred-1.0-py3-none-linux_x86_64.whl
cat > "$W/redc.json" <<JSON
{"out": "$W/dist", "name": "cutred", "version": "1.0", "files": [
 {"path": "bin/reduction", "file": "$red/reduction_packed", "mode": 493}]}
JSON
red_conda=$("$TPY" "$root/tests/it/packages/make_conda.py" "$W/redc.json") || fail "reduction conda"
cat > "$W/extc.json" <<JSON
{"out": "$W/dist", "name": "cutext", "version": "1.0", "files": [
 {"path": "site/cutext/__init__.py", "file": "$W/peek/cutext/__init__.py", "mode": 420},
 {"path": "site/cutext/$(basename "$so")", "file": "$so", "mode": 493}]}
JSON
ext_conda=$("$TPY" "$root/tests/it/packages/make_conda.py" "$W/extc.json") || fail "extension conda"
for v in 7.5 8.0 8.6 8.9 9.0 10.0 12.0; do
  echo "{\"out\": \"$W/channel/linux-64\", \"name\": \"cuda-arch\", \"version\": \"$v\", \"build\": \"0\", \"files\": [], \"constrains\": [\"__cuda_arch $v\"]}" > "$W/meta.json"
  "$TPY" "$root/tests/it/packages/make_conda.py" "$W/meta.json" >/dev/null || fail "cuda-arch $v"
done

# --- split each, with sizes ------------------------------------------------------------
echo
printf '%-34s %12s %12s %12s %10s %10s %8s\n' package fat_B host_B sm90_B host+sm90 everything split_s
for p in "$ext_whl" "$red_whl" "$ext_conda" "$red_conda"; do
  case "$p" in *.whl) into=$W/split ;; *) into=$W/channel/linux-64 ;; esac
  t0=$(date +%s.%N)
  "$F" split "$p" --into "$into" > "$W/split-$(basename "$p").log" 2>&1 || { cat "$W/split-$(basename "$p").log"; fail "split $p"; continue; }
  t=$(python3 -c "print(f'{$(date +%s.%N) - $t0:.2f}')")
  name=$(basename "$p" | cut -d- -f1)
  case "$p" in
    *.whl) host=$(ls "$into/${name}_host-"*.whl); dev=$(ls "$into/${name}_sm90-"*.whl)
           all=$(ls "$into/${name}_"*.whl | grep -v -- '-sm[0-9.]*\.whl$\|-compute[0-9.]*\.whl$') ;;
    *)     host=$(ls "$into/${name}-host-"*.conda); dev=$(ls "$into/${name}-sm90-"*.conda)
           all=$(ls "$into/${name}-host-"*.conda "$into/${name}-sm"*.conda "$into/${name}-compute"*.conda 2>/dev/null) ;;
  esac
  every=0; for f in $all; do every=$((every + $(size "$f"))); done
  fat=$(size "$p"); hs=$(( $(size "$host") + $(size "$dev") ))
  printf '%-34s %12s %12s %12s %10s %10s %8s\n' "$(basename "$p")" "$fat" "$(size "$host")" "$(size "$dev")" \
    "$(ratio $hs $fat)" "$(ratio $every $fat)" "$t"
done
echo

# --- pip: the fat wheel, host + [sm90], everything, the host alone ---------------------
pipi() { "$PY" -m pip install -q --disable-pip-version-check --no-deps "$@"; }
pipx() { "$PY" -m pip install -q --disable-pip-version-check --no-index --find-links "$W/split" "$@"; }
pipi --target "$W/pip-fat" "$ext_whl" "$red_whl" || fail "pip fat"
pipx --target "$W/pip-sm90" 'cutext-host[sm90]' 'cutred-host[sm90]' || fail "pip extras"
pipx --target "$W/pip-all" cutext cutred || fail "pip project"
pipx --target "$W/pip-host" cutext-host cutred-host || fail "pip host alone"
# --- py-rattler: its own detection of this GPU -----------------------------------------
echo "py-rattler, its own detection: $("$TPY" -c 'import rattler; print([str(v) for v in rattler.VirtualPackage.detect() if "Cuda" in str(v)])')"
for n in cutext cutred; do
  echo "  $n: $("$TPY" "$root/tests/it/packages/solve_conda.py" "$W/channel" "$n" detect "$W/conda-$n")"
done

run_ext() { PYTHONPATH=$1 "$PY" "$here/check.py" "$2" > "$2.log" 2>&1; tail -1 "$2.log"; }
run_red() { # DIR_OR_BIN OUT: the GPU result lines of int, float and double
  for t in int float double; do "$1" --type=$t 2>&1 | grep -E "GPU result|Test (passed|failed)"; done > "$2"
  tr '\n' ' ' < "$2"; echo
}
echo "== cutext (PyTorch extension), results' bytes"
run_ext "$W/pip-fat" "$W/ext-fat.bin"
for d in pip-sm90 pip-all; do
  run_ext "$W/$d" "$W/ext-$d.bin"
  cmp -s "$W/ext-fat.bin" "$W/ext-$d.bin" && echo "  $d: identical to the fat wheel" || fail "cutext $d differs"
done
run_ext "$W/conda-cutext/site" "$W/ext-conda.bin"
cmp -s "$W/ext-fat.bin" "$W/ext-conda.bin" && echo "  conda (py-rattler, detected): identical to the fat wheel" || fail "cutext conda differs"
echo "  host alone:"; run_ext "$W/pip-host" "$W/ext-host.bin" >/dev/null
grep -m1 "it is in package" "$W/ext-host.bin.log" || { tail -5 "$W/ext-host.bin.log"; fail "cutext host alone: no install line"; }
echo "== reduction (cuda-samples), GPU results"
run_red "$red/reduction_plain" "$W/red-plain.txt"
run_red "$W/pip-fat/cutred/reduction" "$W/red-fat.txt"
cmp -s "$W/red-plain.txt" "$W/red-fat.txt" && echo "  packed fat: same as plain nvcc" || fail "reduction packed differs from plain"
for b in "$W/pip-sm90/cutred/reduction" "$W/pip-all/cutred/reduction" "$W/conda-cutred/bin/reduction"; do
  run_red "$b" "$W/red-x.txt" >/dev/null
  cmp -s "$W/red-fat.txt" "$W/red-x.txt" && echo "  $b: same as the fat package" || fail "reduction $b differs"
done
echo "  host alone:"; "$W/pip-host/cutred/reduction" --type=int > "$W/red-host.log" 2>&1
grep -m1 "it is in package" "$W/red-host.log" || { tail -5 "$W/red-host.log"; fail "reduction host alone: no install line"; }
ls "$W/pip-sm90/cutred" "$W/conda-cutred/bin"
[ $status = 0 ] && echo "ALL PASSED" || echo "SOME FAILED"
exit $status
