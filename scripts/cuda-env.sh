#!/usr/bin/env bash
# Source this: installs (once) a CUDA 13.0 nvcc + cuobjdump and nvdisasm from PyPI into .cuda/ and puts
# them on PATH. No GPU needed. The pins below are one CUDA 13.0 release's packages; their
# versions must match each other exactly. cuobjdump is on PyPI only from 13.2.51 on (with
# --no-deps, so that it pulls no newer CUDA packages); it lists 13.0 objects correctly.
_fp_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_fp_venv="${FATPACK_CUDA_VENV:-$_fp_root/.cuda}"
# Whatever python3 made the venv (3.11 on Debian 12, 3.12 on Ubuntu 24.04 and Fedora 40).
_fp_cu13() {
    local site
    for site in "$_fp_venv"/lib/python3*/site-packages; do
        [ -d "$site" ] && { echo "$site/nvidia/cu13"; return; }
    done
    echo "$_fp_venv/lib/python3/site-packages/nvidia/cu13"
}
_fp_home="$(_fp_cu13)"
if [ ! -x "$_fp_home/bin/nvcc" ] || [ ! -x "$_fp_home/bin/cuobjdump" ] || [ ! -x "$_fp_home/bin/nvdisasm" ]; then
    echo "installing CUDA 13.0 nvcc from PyPI into $_fp_venv ..." >&2
    python3 -m venv "$_fp_venv" &&
    "$_fp_venv/bin/pip" install -q --disable-pip-version-check \
        nvidia-cuda-nvcc==13.0.88 nvidia-nvvm==13.0.88 nvidia-cuda-crt==13.0.88 \
        nvidia-cuda-runtime==13.0.96 nvidia-cuda-cccl==13.0.85 &&
    "$_fp_venv/bin/pip" install -q --disable-pip-version-check --no-deps nvidia-cuda-cuobjdump==13.2.51 nvidia-cuda-nvdisasm==13.2.51 ||
    { echo "CUDA toolchain install failed" >&2; return 1 2>/dev/null || exit 1; }
    _fp_home="$(_fp_cu13)"
    [ -x "$_fp_home/bin/nvcc" ] ||
        { echo "CUDA toolchain installed but no nvcc under $_fp_home" >&2; return 1 2>/dev/null || exit 1; }
fi
# The wheel's nvcc.profile expects lib64; linking through nvcc needs -L$CUDA_HOME/lib.
[ -e "$_fp_home/lib64" ] || ln -s lib "$_fp_home/lib64"
# The wheel ships only the versioned soname; `-cudart shared` links need the dev name.
[ -e "$_fp_home/lib/libcudart.so" ] || ln -s libcudart.so.13 "$_fp_home/lib/libcudart.so"
export CUDA_HOME="$_fp_home"
export PATH="$CUDA_HOME/bin:$PATH"
unset _fp_root _fp_venv _fp_home
unset -f _fp_cu13
