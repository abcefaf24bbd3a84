#!/usr/bin/env bash
# ON THE GPU MACHINE (its static CUDA libraries): does GNU ld's time on the static cuBLAS
# program depend on a few hundred bytes of code placed before the libraries' code? Plain
# g++ links of tests/gpu/cublas with one extra object whose .text holds PAD bytes, for
# several PAD, interleaved in ROUNDS rounds: wall, user and sys of each link; plain, or
# through FATPACK (a fatpack binary: its default link, and fatpack's link step).
#   ROUNDS=2 bash bench/h200/ld_layout_probe.sh [FATPACK]
set -u
root="$(pwd)"; fp="${1:+$(realpath "$1")}"; CUDA=/usr/local/cuda; export PATH="$CUDA/bin:$PATH"
W=$(mktemp -d); cd "$W"
nvcc -O2 -std=c++17 -c "$root/tests/gpu/cublas/cublas_check.cu" -o check.o || exit 1
LIBS=(-L"$CUDA/lib64" -lcublas_static -lcublasLt_static -lculibos -lcudart_static -lpthread -ldl -lrt)
PADS="0 64 192 448 1024 4096"
for p in $PADS; do
  printf '.text\n.globl pad_%s\npad_%s:\n.fill %s,1,0x90\n.section .note.GNU-stack,"",@progbits\n' "$p" "$p" "$p" > pad$p.s
  as pad$p.s -o pad$p.o
done
WRAP=()
if [ -n "$fp" ]; then
  mkdir -p w && ln -s "$fp" w/ld && WRAP=(-Bw -Wl,--fatpack-verbose)
fi
for r in $(seq "${ROUNDS:-2}"); do
  for p in $PADS; do
    /usr/bin/time -f "pad $p wall %e user %U sys %S" g++ "${WRAP[@]}" -o out$p check.o pad$p.o "${LIBS[@]}" 2>err.txt
    tail -1 err.txt
    grep -o 'link [0-9.]*s, stub' err.txt | sed "s/^/pad $p fatpack's /"
  done
done 2>&1 | sort -k2,2n -k3
ld --version | head -1
