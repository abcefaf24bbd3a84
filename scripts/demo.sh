#!/usr/bin/env bash
# The main job on sample inputs that ship with the repo: link nvcc 13 objects built for
# sm_75/80/86/90 + PTX through `fatpack ld`, show what went into the store, run the result,
# split it into per-arch packs and join them back.
# Installs the CUDA toolchain from PyPI on first use (scripts/cuda-env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/cuda-env.sh
bash scripts/build.sh
f=tests/fixtures/nvcc13
# Everything the demo makes, kept to look at afterwards (git ignores it).
out="$PWD/demo-out"
rm -rf "$out" && mkdir -p "$out"
mkdir -p "$out/wrap" && ln -sf "$PWD/target/release/fatpack" "$out/wrap/ld"
g++ -o "$out/app_plain" $f/main.o $f/kernels.o $f/other.o -L"$CUDA_HOME/lib" -lcudart_static -ldl -lpthread -lrt
echo "== linking $f/{main,kernels,other}.o through fatpack ld (g++ -B$out/wrap), as it comes"
# Under 512 KiB of device code packing cannot pay: the link is the real linker's, byte for byte.
g++ -B"$out/wrap" -Wl,--fatpack-verbose -o "$out/app_default" $f/main.o $f/kernels.o $f/other.o \
    -L"$CUDA_HOME/lib" -lcudart_static -ldl -lpthread -lrt
cmp "$out/app_default" "$out/app_plain" && echo "app_default is the plain link's bytes"
echo "== the same link packed (-Wl,--fatpack-mode=packed)"
g++ -B"$out/wrap" -Wl,--fatpack-mode=packed -Wl,--fatpack-verbose -o "$out/app" $f/main.o $f/kernels.o $f/other.o \
    -L"$CUDA_HOME/lib" -lcudart_static -ldl -lpthread -lrt
echo "== fatpack inspect $out/app"
./target/release/fatpack inspect "$out/app"
echo "== running it (host code only: this machine may have no GPU)"
"$out/app"
echo "== an ordinary object, for comparison: fatpack inspect --kernels $f/kernels_af.o"
./target/release/fatpack inspect --kernels $f/kernels_af.o
ls -l "$out/app" "$out/app_plain"
echo "== one build for every GPU, each machine only its own: fatpack split, then join"
./target/release/fatpack split "$out/app" --into "$out/split"
ls -l "$out/split"
"$out/split/app"
./target/release/fatpack join "$out/split/app" -o "$out/joined"
cmp "$out/app" "$out/joined" && echo "joined: the same bytes as $out/app"
echo "== done: the outputs are in $out"
