# Sourced by bench/h200/link_overlap.sh and link_routes.sh: the two programs of issue 24 and
# how their links are timed. Needs root and W set; leaves CUDA, CUBLAS, FIVE and check.o,
# five.o in $W (the current directory from then on), and defines:
#   timed NAME PROGRAM WHO  - runs the caller's `link PROGRAM WHO PROGRAM.WHO.bin`, prints "NAME wall rc",
#                             the link's stderr in NAME.err;
#   medians TIMES           - per program, each link's walls, median and ratio to plain;
#   rounds N WHO...         - per program (cublas, five): one plain link for the page cache,
#                             then N rounds of the WHOs' links interleaved ("NAME wall rc" in
#                             times.txt), then their medians;
#   logging_ld DIR          - DIR/ld writes its arguments, one per line, to $LDLOG (an ld
#                             response file), then runs ld; DIR/g++ is g++ -BDIR;
#   nowrap_line RSP         - prints the saved line RSP with each `--wrap=X` given as
#                             `--defsym=__real_X=X` (the same symbols, no table of wrapped names).
# Sourced by line_ablation.sh too.
# Programs: the static cuBLAS program of tests/gpu/cublas (g++), and bench/h200/five_libs.cu
# on static cuBLAS, cuSOLVER, cuSPARSE, cuFFT (device-linked callback) and cuRAND through
# `nvcc -rdc=true`.
logging_ld() {
    mkdir -p "$1"
    printf '#!/bin/sh\nprintf "%%s\\n" "$@" >"$LDLOG"\nexec %s "$@"\n' "$(command -v ld)" >"$1/ld"
    printf '#!/bin/sh\nexec g++ -B"%s" "$@"\n' "$1" >"$1/g++"
    chmod +x "$1/ld" "$1/g++"
}
nowrap_line() { sed 's/^--wrap=\(.*\)$/--defsym=__real_\1=\1/' "$1"; }
CUDA="${CUDA_HOME:-/usr/local/cuda}"
export PATH="$CUDA/bin:$PATH"
echo "$(nproc) CPUs; $(nvcc --version | tail -2 | head -1); $(ld --version | head -1)"
cd "$W"
nvcc -O2 -std=c++17 -c "$root/tests/gpu/cublas/cublas_check.cu" -o check.o || exit 1
nvcc -O2 -std=c++17 -rdc=true -arch=sm_90 -c "$root/bench/h200/five_libs.cu" -o five.o || exit 1
CUBLAS=(-L"$CUDA/lib64" -lcublas_static -lcublasLt_static -lculibos -lcudart_static -lpthread -ldl -lrt)
FIVE=(-L"$CUDA/lib64" -lcusolver_static -lcusolver_lapack_static -lcublas_static -lcublasLt_static
    -lcusparse_static -lcufft_static -lcurand_static -lculibos)
cat "$CUDA"/lib64/lib{cublas,cublasLt,cusolver,cusolver_lapack,cusparse,cufft,curand}_static.a >/dev/null
ls -l "$CUDA"/lib64/lib{cublas,cublasLt,cusolver,cusolver_lapack,cusparse,cufft,curand}_static.a | awk '{print "  " $5, $NF}'
timed() {
    local t0 t1 rc
    t0=$(date +%s.%N)
    link "$2" "$3" "$2.$3.bin" 2>"$1.err"
    rc=$?
    t1=$(date +%s.%N)
    echo "$1 $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }') $rc"
}
medians() {
    python3 - "$1" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for name, wall, rc in rows:
    prog, who, rnd = name.split(".")
    by.setdefault(prog, {}).setdefault(who, []).append((float(wall), rc))
for prog, whos in by.items():
    base = statistics.median(w for w, _ in whos["plain"])
    n = len(whos["plain"])
    print(f"{prog}: {'link':<6} {f'walls (s), {n} rounds':<44} {'median':>7} {'vs plain':>8}")
    for who, v in whos.items():
        walls = [w for w, _ in v]
        med = statistics.median(walls)
        print(f"{prog}: {who:<6} {' '.join(f'{w:.2f}' for w in walls):<44} {med:>7.2f} {med / base:>8.3f}  rc {','.join(sorted(set(r for _, r in v)))}")
PY
}
rounds() {
    local n=$1 prog round who
    shift
    for prog in cublas five; do
        link "$prog" plain 2>/dev/null
        for round in $(seq "$n"); do
            for who in "$@"; do
                timed "$prog.$who.$round" "$prog" "$who"
            done
        done
    done >times.txt
    medians times.txt
}
