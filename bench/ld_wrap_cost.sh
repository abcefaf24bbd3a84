#!/usr/bin/env bash
# What any --wrap costs GNU ld, which a packed link's line always carries (the runtime wraps
# cudart's registration and launch calls): with a wrap given, ld looks every global symbol's
# name up once more, in its table of wrapped names, hashing the whole name. A program of
# many long C++-style names (a static CUDA library's kernels) pays it per name. Generates
# OBJECTS objects of FUNCS functions each (names of about 280 characters, two calls each to
# functions of other objects), then links them with plain gcc, without a wrap and with one
# (`--wrap=cudaMalloc`, a name none of them uses: the output is the same bytes), alternating,
# ROUNDS rounds; prints each link's user CPU seconds, the medians and their ratio.
#   bash bench/ld_wrap_cost.sh [OBJECTS=40] [FUNCS=2500] [ROUNDS=9]
set -euo pipefail
objects=${1:-40} funcs=${2:-2500} rounds=${3:-9}
w=$(mktemp -d)
trap 'rm -rf "$w"' EXIT
python3 - "$w" "$objects" "$funcs" <<'PY'
import random, sys
w, n, f = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
random.seed(7)
alpha = "abcdefghijklmnopqrstuvwxyz0123456789_"
names = [["_ZN7cublasLt" + "".join(random.choice(alpha) for _ in range(250)) + f"_{o}_{i}Ev"
          for i in range(f)] for o in range(n)]
for o in range(n):
    with open(f"{w}/o{o}.s", "w") as out:
        out.write(".text\n")
        for i in range(f):
            s = names[o][i]
            out.write(f".globl {s}\n.type {s},@function\n{s}:\n")
            for _ in range(2):
                out.write(f" call {names[random.randrange(n)][random.randrange(f)]}\n")
            out.write(" ret\n")
        out.write('.section .note.GNU-stack,"",@progbits\n')
with open(f"{w}/main.s", "w") as out:
    out.write(f".text\n.globl main\nmain:\n call {names[0][0]}\n xor %eax,%eax\n ret\n"
              '.section .note.GNU-stack,"",@progbits\n')
PY
ls "$w"/*.s | xargs -P "$(nproc)" -I{} sh -c 'as -o "${1%.s}.o" "$1"' _ {}
objs=("$w/main.o")
for o in $(seq 0 $((objects - 1))); do objs+=("$w/o$o.o"); done
echo "machine: $(nproc) CPUs, $(ld --version | head -1); $objects objects, $((objects * funcs)) global functions, $(du -shc "$w"/*.o | tail -1 | cut -f1)"
: >"$w/times"
for r in $(seq "$rounds"); do
    /usr/bin/time -f "none %U" -a -o "$w/times" gcc -o "$w/none" "${objs[@]}"
    /usr/bin/time -f "one %U" -a -o "$w/times" gcc -o "$w/one" "${objs[@]}" -Wl,--wrap=cudaMalloc
done
cmp "$w/none" "$w/one" && echo "outputs: the same bytes"
python3 - "$w/times" <<'PY'
import statistics, sys
t = {}
for l in open(sys.argv[1]):
    k, v = l.split()
    t.setdefault(k, []).append(float(v))
m = {k: statistics.median(v) for k, v in t.items()}
for k, v in t.items():
    print(f"{k:>5} wrap: user s {' '.join(f'{x:.2f}' for x in v)}  median {m[k]:.3f}")
print(f"one wrap / none: {m['one'] / m['none']:.3f}")
PY
