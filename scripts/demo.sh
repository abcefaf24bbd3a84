#!/usr/bin/env bash
# The main job on the sample inputs that ship with the repo: inspect nvcc 13 objects, an
# archive, a shared library and an executable built for sm_75/80/86/90 + PTX.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -q
f=tests/fixtures/nvcc13
./target/release/fatpack inspect $f/kernels.o $f/libfixture.a $f/libfixture.so
./target/release/fatpack inspect --kernels $f/kernels_af.o
