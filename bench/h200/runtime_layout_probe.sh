#!/usr/bin/env bash
# ON THE GPU MACHINE (its static CUDA libraries): the static cuBLAS program (tests/gpu/cublas)
# linked by one fatpack CLI with each runtime archive in .device/rt-NAME.a
# (FATPACK_RUNTIME), 3 interleaved rounds beside plain g++: wall, user and sys of each link,
# fatpack's link step, and the outputs' segments. Shows how much the runtime's own layout
# moves GNU ld's time.
#   bash bench/h200/runtime_layout_probe.sh   (rt-767a75b.a, rt-01006f7.a, rt-head.a present)
set -u
root="$(pwd)"; CUDA=/usr/local/cuda; export PATH="$CUDA/bin:$PATH"
W=$(mktemp -d); cd "$W"
nvcc -O2 -std=c++17 -c "$root/tests/gpu/cublas/cublas_check.cu" -o check.o || exit 1
LIBS=(-L"$CUDA/lib64" -lcublas_static -lcublasLt_static -lculibos -lcudart_static -lpthread -ldl -lrt)
mkdir -p w; ln -s "$root/target/release/fatpack" w/ld
for r in 1 2 3; do
  /usr/bin/time -f "plain wall %e user %U sys %S" g++ -o plain.bin check.o "${LIBS[@]}"
  for rt in 767a75b 01006f7 head; do
   FATPACK_RUNTIME="$root/.device/rt-$rt.a" /usr/bin/time -f "rt $rt wall %e user %U sys %S" g++ -Bw -Wl,--fatpack-verbose -o $rt.bin check.o "${LIBS[@]}" 2> err.txt
   tail -1 err.txt; grep -o 'link [0-9.]*s, stub' err.txt
  done
done 2>&1 | sort
for rt in 767a75b 01006f7 head; do readelf -lW $rt.bin | grep -E 'LOAD|NOTE' | tr -s ' ' | sed "s/^/$rt /"; done
