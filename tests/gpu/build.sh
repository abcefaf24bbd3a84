#!/usr/bin/env bash
# Builds the fatpack GPU suite and the first-kernel benchmark in every variant HERE (no GPU
# needed: nvcc 13.0 from PyPI via scripts/cuda-env.sh, and the fatpack binary), into a
# self-contained OUTDIR that tests/gpu/run.sh executes on the GPU machine.
#
#   bash tests/gpu/build.sh [OUTDIR]          (default: tests/gpu/out, git-ignored)
#
# Environment:
#   FATPACK=/path/to/fatpack   default target/release/fatpack, else target/debug/fatpack
#                              (it carries its runtime; FATPACK_RUNTIME overrides).
#   GPU_BUILD_DIR=DIR          intermediates (default: tests/gpu/build, git-ignored)
#   JOBS=N                     parallel compiles (default: nproc)
#   SKIP_BENCH=1               do not build first_kernel (the slow part: ~40 heavy compiles)
#   BENCH_TUS/BENCH_KPER/BENCH_OPS  size of the generated heavy device code (8/6/2500)
#
# A variant that fails to build is reported and skipped; the others are still built.
# OUTDIR/BUILD_STATUS lists every variant as OK or FAILED (run.sh reads it).
set -uo pipefail
# The suite's programs hold less device code than `fatpack ld` packs by default (512 KiB,
# src/link/worth_packing.rs): its packed variants ask for packing.
export FATPACK_MODE=packed

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
src="$here/src"
out="$(realpath -m "${1:-$here/out}")"
work="$(realpath -m "${GPU_BUILD_DIR:-$here/build}")"
jobs_max="${JOBS:-$(nproc)}"

# shellcheck disable=SC1091
source "$root/scripts/cuda-env.sh" || { echo "build.sh: cannot set up nvcc (scripts/cuda-env.sh)" >&2; exit 1; }

# --- fatpack: copied, so that a concurrent cargo build cannot swap it mid-way ---------------
# It carries its runtime (build.rs); FATPACK_RUNTIME, if set, is passed on as an override.
fp_src="${FATPACK:-}"
if [ -z "$fp_src" ]; then
    for cand in "$root/target/release/fatpack" "$root/target/debug/fatpack"; do
        if [ -x "$cand" ]; then fp_src="$cand"; break; fi
    done
fi
if [ -z "$fp_src" ] || [ ! -x "$fp_src" ]; then
    echo "build.sh: no fatpack binary; run \`cargo build --release\` (or set FATPACK=...)" >&2
    exit 1
fi

# Everything is rebuilt, except the benchmark objects when their inputs are unchanged (below).
if [ -d "$work" ]; then
    find "$work" -mindepth 1 -maxdepth 1 ! -name bobj ! -name gen -exec rm -rf {} +
fi
rm -rf "$out" "$out.tar.xz"
mkdir -p "$work/logs" "$work/fp" "$out"
cp "$fp_src" "$work/fp/fatpack"
ln -s fatpack "$work/fp/ld"        # gcc -B$work/fp finds it as its linker
FP="$work/fp/fatpack"

echo "build.sh: $("$FP" --version 2>/dev/null | tr '\n' ' ')from $fp_src"
echo "build.sh: $(nvcc --version | tail -2 | head -1)"
echo "build.sh: output $out, intermediates $work"

G_FULL="-gencode arch=compute_75,code=sm_75 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_86,code=sm_86 -gencode arch=compute_89,code=sm_89 -gencode arch=compute_90,code=[sm_90,compute_90]"
G_PTX80="-gencode arch=compute_80,code=[sm_80,compute_80]"
# No -g anywhere: host debug info would only bloat OUTDIR.
NV=(nvcc -O2 -std=c++17 -Xcompiler -fPIC "-Xcompiler=-ffile-prefix-map=$root/=" -I"$src")

set_flags() {
    case "$1" in
        std) echo "$G_FULL" ;;
        ca) echo "$G_FULL -Xfatbin=-compress-all" ;;
        # nvcc's smallest fat binary (zstd, decoded by the driver; driver >= 550).
        sz) echo "$G_FULL --compress-mode=size" ;;
        ptx80) echo "$G_PTX80" ;;
    esac
}

failed=()
workarounds=()
status_file="$out/BUILD_STATUS"
: >"$status_file"

# --- a small job pool -------------------------------------------------------------------
# job LOG CMD...: runs CMD in the background, output to LOG; LOG.fail marks a failure.
job() {
    local log="$1"
    shift
    while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do sleep 0.2; done
    ( "$@" >"$log" 2>&1 || { echo "FAILED (rc $?): $*" >>"$log"; touch "$log.fail"; } ) &
}
# wait_jobs WHAT: waits for all jobs; prints the failed logs; returns 1 if any failed.
wait_jobs() {
    wait
    local f rc=0
    for f in "$work"/logs/*.fail; do
        [ -e "$f" ] || continue
        rc=1
        echo "build.sh: FAILED: ${f%.fail}" >&2
        tail -n 25 "${f%.fail}" >&2
        mv "$f" "$f.seen"
    done
    return $rc
}

# --- compile the suite objects: three sets --------------------------------------------------
SUITE_TUS=(main a b c g h k m o d e)
RDC_TUS=(f1 f2)
declare -A set_ok
t_start=$SECONDS
for set in std ca ptx80; do
    mkdir -p "$work/obj/$set"
    # shellcheck disable=SC2207
    flags=($(set_flags $set))
    for tu in "${SUITE_TUS[@]}"; do
        job "$work/logs/cc_${set}_$tu.log" "${NV[@]}" "${flags[@]}" -c "$src/$tu.cu" -o "$work/obj/$set/$tu.o"
    done
    for tu in "${RDC_TUS[@]}"; do
        job "$work/logs/cc_${set}_$tu.log" "${NV[@]}" "${flags[@]}" -rdc=true -c "$src/$tu.cu" -o "$work/obj/$set/$tu.o"
    done
done
wait_jobs
for set in std ca ptx80; do
    # shellcheck disable=SC2207
    flags=($(set_flags $set))
    ok=1
    for tu in "${SUITE_TUS[@]}" "${RDC_TUS[@]}"; do
        [ -f "$work/obj/$set/$tu.o" ] && [ ! -e "$work/logs/cc_${set}_$tu.log.fail.seen" ] || ok=0
    done
    if [ $ok = 1 ]; then
        # The device link of the -rdc objects: the dlink object goes into the host link.
        if ! nvcc "${flags[@]}" -dlink "$work/obj/$set/f1.o" "$work/obj/$set/f2.o" -o "$work/obj/$set/dlink.o" \
            >"$work/logs/dlink_$set.log" 2>&1; then
            echo "build.sh: FAILED: device link of set $set" >&2
            tail -n 25 "$work/logs/dlink_$set.log" >&2
            ok=0
        fi
    fi
    set_ok[$set]=$ok
done
echo "build.sh: suite objects compiled in $((SECONDS - t_start)) s (std=${set_ok[std]} ca=${set_ok[ca]} ptx80=${set_ok[ptx80]})"

# --- link the suite variants -----------------------------------------------------------------
# link_suite NAME SET plain|packed static|shared [extra link flags...]
link_suite() {
    local name="$1" set="$2" mode="$3" rt="$4"
    shift 4
    local dir="$out/$name" obj="$work/obj/$set"
    rm -rf "$dir"
    mkdir -p "$dir"
    local cxx=(g++)
    [ "$mode" = packed ] && cxx+=(-B"$work/fp")
    # Tail mode: the same wrapper, no store and no runtime (fatbins moved past .bss).
    [ "$mode" = tail ] && cxx+=(-B"$work/fp" -Wl,--fatpack-mode=tail)
    local libs=(-L"$CUDA_HOME/lib")
    if [ "$rt" = shared ]; then
        libs+=(-lcudart)
        # Bundled: the exact cudart linked against; $ORIGIN finds it.
        cp "$CUDA_HOME/lib/libcudart.so.13" "$dir/"
    else
        libs+=(-lcudart_static)
    fi
    libs+=(-ldl -lpthread -lrt)
    # shellcheck disable=SC2016
    local rpath='-Wl,-rpath,$ORIGIN'
    local exe_objs=("$obj"/{main,a,b,c,g,h,k,m,o,f1,f2,dlink}.o)
    if [ -n "${SCRIPT_INPUTS:-}" ]; then
        # The program's objects but main.o named by an implicit linker script, as libc.so
        # names its parts: `-lsuiteobjs` finds libsuiteobjs.so, which is INPUT(...).
        local scripted="$work/stage/$name"
        mkdir -p "$scripted"
        printf '/* GNU ld script */\nINPUT ( %s )\n' "${exe_objs[*]:1}" >"$scripted/libsuiteobjs.so"
        exe_objs=("${exe_objs[0]}" -L"$scripted" -lsuiteobjs)
    fi
    echo "+ ${cxx[*]} $* -shared -o $dir/libsuite_lib.so ..."
    "${cxx[@]}" "$@" -shared -o "$dir/libsuite_lib.so" "$obj/d.o" "${libs[@]}" "$rpath" || return 1
    echo "+ ${cxx[*]} $* -shared -o $dir/libdyn.so ..."
    "${cxx[@]}" "$@" -shared -o "$dir/libdyn.so" "$obj/e.o" "${libs[@]}" "$rpath" || return 1
    echo "+ ${cxx[*]} $* -o $dir/suite ... -L$dir -lsuite_lib ..."
    if "${cxx[@]}" "$@" -o "$dir/suite" "${exe_objs[@]}" \
        -L"$dir" -lsuite_lib -L"$CUDA_HOME/lib" -lcudadevrt "${libs[@]}" "$rpath"; then
        return 0
    fi
    [ "$mode" = packed ] || return 1
    # Workaround for a fatpack ld that refuses an already packed shared library as a link
    # input: link against an unpacked build of the same library (same soname and exports);
    # the packed one stays in $dir and is what the suite loads at run time.
    echo "WORKAROUND: linking against the unpacked libsuite_lib.so (packed one as input failed)"
    local stage="$work/stage/$name"
    mkdir -p "$stage"
    g++ -shared -o "$stage/libsuite_lib.so" "$obj/d.o" "${libs[@]}" || return 1
    "${cxx[@]}" "$@" -o "$dir/suite" "${exe_objs[@]}" \
        -L"$stage" -lsuite_lib -L"$CUDA_HOME/lib" -lcudadevrt "${libs[@]}" "$rpath" || return 1
    touch "$dir/.workaround"
}

# variant NAME SET MODE RT [extra...]: link + inspect, recorded in BUILD_STATUS.
variant() {
    local name="$1" set="$2" mode="$3"
    local log="$work/logs/link_$name.log"
    if [ "${set_ok[$set]}" != 1 ]; then
        echo "build.sh: variant $name: SKIPPED (objects of set $set failed)" >&2
        echo "$name FAILED objects of set $set did not compile" >>"$status_file"
        failed+=("$name")
        rm -rf "${out:?}/$name"
        return 1
    fi
    local t0=$SECONDS
    if ! link_suite "$@" >"$log" 2>&1; then
        echo "build.sh: variant $name: LINK FAILED ($log):" >&2
        tail -n 30 "$log" >&2
        echo "$name FAILED link (see $log)" >>"$status_file"
        failed+=("$name")
        return 1
    fi
    if [ -e "$out/$name/.workaround" ]; then
        rm -f "$out/$name/.workaround"
        echo "$name OK $set $mode (WORKAROUND: suite linked against an unpacked libsuite_lib.so; see $log)" >>"$status_file"
        echo "build.sh: variant $name: linked in $((SECONDS - t0)) s, WITH WORKAROUND:" >&2
        grep -m3 "fatpack ld: error" "$log" >&2
        workarounds+=("$name")
    else
        echo "$name OK $set $mode" >>"$status_file"
        echo "build.sh: variant $name: linked in $((SECONDS - t0)) s"
    fi
    return 0
}

variant plain std plain static
variant plain_compress_all ca plain static
variant packed std packed static
variant packed_shared_cudart std packed shared
variant ptx_only ptx80 packed static
# Reference for ptx_only: the same objects, ordinary link (a failure in both is not fatpack's).
variant ptx_only_plain ptx80 plain static
# The store next to the binary (<file>.fatpack) instead of inside it.
variant packed_side_file std packed static -Wl,--fatpack-side-file
# The direct route (inputs linked as given, containers replaced in the output), whatever
# the inputs' sizes would choose.
variant packed_direct std packed static -Wl,--fatpack-route=direct
# The program's objects named inside an implicit linker script (the copy route gives ld a
# copy of the script naming the rewritten objects).
SCRIPT_INPUTS=1 variant packed_script std packed static
if grep -q '^packed_script OK' "$status_file" && grep -q '^packed OK' "$status_file"; then
    # As many modules packed as when the line names the objects itself.
    n_line="$("$FP" inspect "$out/packed/suite" | grep -c '^  module ')"
    n_script="$("$FP" inspect "$out/packed_script/suite" | grep -c '^  module ')"
    if [ "$n_line" != "$n_script" ] || [ "$n_line" = 0 ]; then
        echo "build.sh: variant packed_script: $n_script modules packed, $n_line without the script" >&2
        sed -i "s/^packed_script OK.*/packed_script FAILED $n_script modules packed, $n_line without the script/" "$status_file"
        failed+=(packed_script)
    fi
fi

# A packed build after `strip` (what distribution packaging does to binaries).
if grep -q '^packed OK' "$status_file"; then
    rm -rf "$out/packed_stripped"
    cp -a "$out/packed" "$out/packed_stripped"
    if strip --strip-all "$out/packed_stripped/suite" "$out/packed_stripped/libsuite_lib.so" \
        "$out/packed_stripped/libdyn.so" >"$work/logs/strip.log" 2>&1; then
        echo "packed_stripped OK std packed+strip" >>"$status_file"
        echo "build.sh: variant packed_stripped: stripped copy of packed"
    else
        echo "packed_stripped FAILED strip (see $work/logs/strip.log)" >>"$status_file"
        failed+=(packed_stripped)
    fi
fi

# A packed build after `eu-strip -f` (elfutils; what RPM's find-debuginfo and Debian's
# dh_strip do): the store is an allocated section in its own PT_LOAD, so it stays.
if grep -q '^packed OK' "$status_file"; then
    rm -rf "$out/packed_eu_stripped"
    cp -a "$out/packed" "$out/packed_eu_stripped"
    ok=1
    for b in suite libsuite_lib.so libdyn.so; do
        eu-strip --remove-comment -f "$work/$b.debug" "$out/packed_eu_stripped/$b" >>"$work/logs/eu-strip.log" 2>&1 || ok=0
    done
    if [ $ok = 1 ]; then
        echo "packed_eu_stripped OK std packed+eu-strip" >>"$status_file"
        echo "build.sh: variant packed_eu_stripped: eu-strip --remove-comment -f copy of packed"
    else
        echo "packed_eu_stripped FAILED eu-strip (see $work/logs/eu-strip.log)" >>"$status_file"
        failed+=(packed_eu_stripped)
    fi
fi

# __managed__ variables touched by host code before any kernel or other CUDA call.
mkdir -p "$work/managed"
if "${NV[@]}" $G_FULL -c "$src/managed_first.cu" -o "$work/managed/managed_first.o" >"$work/logs/managed.log" 2>&1; then
    for m in plain packed packed_shared; do
        d="$out/managed/$m"
        mkdir -p "$d"
        cxx=(g++)
        [ "$m" != plain ] && cxx+=(-B"$work/fp")
        rt=(-lcudart_static)
        if [ "$m" = packed_shared ]; then
            rt=(-lcudart)
            cp "$CUDA_HOME/lib/libcudart.so.13" "$d/"
        fi
        # shellcheck disable=SC2016
        if "${cxx[@]}" -o "$d/managed_first" "$work/managed/managed_first.o" -L"$CUDA_HOME/lib" "${rt[@]}" \
            -ldl -lpthread -lrt '-Wl,-rpath,$ORIGIN' >>"$work/logs/managed.log" 2>&1; then
            echo "managed/$m OK std $m" >>"$status_file"
        else
            echo "managed/$m FAILED link (see $work/logs/managed.log)" >>"$status_file"
            failed+=("managed/$m")
        fi
    done
else
    echo "managed FAILED compile (see $work/logs/managed.log)" >>"$status_file"
    failed+=(managed)
fi

# A packed program naming a packed library's kernel from outside (the documented limitation).
d="$out/cross_lib"
mkdir -p "$d"
cp "$CUDA_HOME/lib/libcudart.so.13" "$d/"
# shellcheck disable=SC2016
if "${NV[@]}" $G_FULL -DCROSS_LIB -c "$src/cross_lib.cu" -o "$work/managed/cross_lib.o" >>"$work/logs/cross.log" 2>&1 &&
    "${NV[@]}" $G_FULL -c "$src/cross_lib.cu" -o "$work/managed/cross_main.o" >>"$work/logs/cross.log" 2>&1 &&
    g++ -B"$work/fp" -shared -o "$d/libcross.so" "$work/managed/cross_lib.o" -L"$CUDA_HOME/lib" -lcudart '-Wl,-rpath,$ORIGIN' >>"$work/logs/cross.log" 2>&1 &&
    g++ -B"$work/fp" -o "$d/cross_lib" "$work/managed/cross_main.o" -L"$d" -lcross -L"$CUDA_HOME/lib" -lcudart '-Wl,-rpath,$ORIGIN' >>"$work/logs/cross.log" 2>&1; then
    echo "cross_lib OK std packed" >>"$status_file"
else
    echo "cross_lib FAILED (see $work/logs/cross.log)" >>"$status_file"
    failed+=(cross_lib)
fi

# Tail mode: ordinary fatbins placed last (after .bss and .ldata) by linker-scripts/fatbin-tail.ld.
variant tail std tail static

# `fatpack prune --keep sm_90,compute_90` without relinking, on a packed and on a plain build.
for src in packed plain tail; do
    if grep -q "^$src OK" "$status_file"; then
        dst="pruned_$src"
        rm -rf "${out:?}/$dst"
        cp -a "$out/$src" "$out/$dst"
        ok=1
        for b in suite libsuite_lib.so libdyn.so; do
            rm -f "$out/$dst/$b" "$out/$dst/$b.fatpack"
            "$FP" prune --keep sm_90,compute_90 "$out/$src/$b" -o "$out/$dst/$b" >>"$work/logs/prune_$dst.log" 2>&1 || ok=0
        done
        if [ $ok = 1 ]; then
            echo "$dst OK pruned90 $src+pruned" >>"$status_file"
            echo "build.sh: variant $dst: $(tail -n 3 "$work/logs/prune_$dst.log" | tr '\n' ' ')"
        else
            echo "$dst FAILED prune (see $work/logs/prune_$dst.log)" >>"$status_file"
            failed+=("$dst")
        fi
    fi
done

# A release store (solid groups, store format 1.1) written by the link itself.
variant packed_release_link std packed static -Wl,--fatpack-release

# `fatpack split` of the packed build: host binaries plus per-arch packs; split_packed keeps
# every pack, split_packed_sm90 only the sm_90 ones (what a 9.0 machine would install);
# split_release_sm90 likewise from the release build (its groups stay whole in their packs).
for dst in split_packed split_packed_sm90 split_release_sm90; do
    src=packed
    [ $dst = split_release_sm90 ] && src=packed_release_link
    grep -q "^$src OK" "$status_file" || continue
        rm -rf "${out:?}/$dst"
        cp -a "$out/$src" "$out/$dst"
        ok=1
        for b in suite libsuite_lib.so libdyn.so; do
            rm -f "$out/$dst/$b"
            "$FP" split "$out/$src/$b" --into "$out/$dst" >>"$work/logs/split_$dst.log" 2>&1 || ok=0
        done
        if [ $dst != split_packed ]; then
            find "$out/$dst" -name '*.fatpack' ! -name '*.sm_90.fatpack' -delete
        fi
        if [ $ok = 1 ]; then
            echo "$dst OK split packed+split" >>"$status_file"
            echo "build.sh: variant $dst: $(ls "$out/$dst" | tr '\n' ' ')"
        else
            echo "$dst FAILED split (see $work/logs/split_$dst.log)" >>"$status_file"
            failed+=("$dst")
        fi
done

# --- first_kernel benchmark ------------------------------------------------------------------
bench_ok=1
if [ "${SKIP_BENCH:-0}" != 1 ]; then
    t_start=$SECONDS
    gen="$work/gen"
    stamp="$( { cat "$here/bench/gen_heavy.py"; echo "${BENCH_TUS:-8} ${BENCH_KPER:-6} ${BENCH_OPS:-2500} $G_FULL ${NV[*]} sets: std ca sz"; nvcc --version; } | sha256sum | cut -d' ' -f1)"
    if [ -f "$work/bobj/stamp" ] && [ "$(cat "$work/bobj/stamp")" = "$stamp" ]; then
        echo "build.sh: benchmark objects unchanged, reusing $work/bobj"
        bench_cached=1
    else
        bench_cached=0
        rm -rf "$work/bobj" "$gen"
        python3 "$here/bench/gen_heavy.py" "$gen" "${BENCH_TUS:-8}" "${BENCH_KPER:-6}" "${BENCH_OPS:-2500}" || bench_ok=0
    fi
    bench_tus=()
    for f in "$gen"/heavy_*.cu; do bench_tus+=("$(basename "$f" .cu)"); done
    for set in std ca sz; do
        mkdir -p "$work/bobj/$set"
        # shellcheck disable=SC2207
        flags=($(set_flags $set))
        if [ "$bench_cached" = 0 ]; then
            for tu in "${bench_tus[@]}"; do
                job "$work/logs/bcc_${set}_$tu.log" "${NV[@]}" "${flags[@]}" -c "$gen/$tu.cu" -o "$work/bobj/$set/$tu.o"
            done
        fi
        job "$work/logs/bcc_${set}_first_kernel.log" "${NV[@]}" "${flags[@]}" -c "$here/bench/first_kernel.cu" \
            -o "$work/bobj/$set/first_kernel.o"
    done
    wait_jobs || bench_ok=0
    [ "$bench_cached" = 0 ] && [ $bench_ok = 1 ] && echo "$stamp" >"$work/bobj/stamp"
    echo "build.sh: benchmark objects ready in $((SECONDS - t_start)) s"
    bench_link() { # NAME SET MODE
        local name="$1" set="$2" mode="$3" dir="$out/bench/$1"
        mkdir -p "$dir"
        local cxx=(g++)
        [ "$mode" = packed ] && cxx+=(-B"$work/fp")
        [ "$mode" = tail ] && cxx+=(-B"$work/fp" -Wl,--fatpack-mode=tail)
        if [ $bench_ok = 1 ] && "${cxx[@]}" -o "$dir/first_kernel" "$work/bobj/$set/first_kernel.o" \
            "$work/bobj/$set"/heavy_*.o -L"$CUDA_HOME/lib" -lcudart_static -ldl -lpthread -lrt \
            >"$work/logs/blink_$name.log" 2>&1; then
            echo "bench/$name OK $set $mode" >>"$status_file"
            echo "build.sh: bench/$name: $(stat -c %s "$dir/first_kernel") bytes"
        else
            echo "bench/$name FAILED (see $work/logs/blink_$name.log)" >>"$status_file"
            echo "build.sh: bench/$name FAILED" >&2
            tail -n 30 "$work/logs/blink_$name.log" >&2 2>/dev/null
            failed+=("bench/$name")
            rm -rf "$dir"
        fi
    }
    bench_link plain std plain
    bench_link plain_compress_all ca plain
    bench_link plain_size sz plain
    bench_link packed std packed
    bench_link tail std tail
    # The release step: the packed binary's store compressed again at level 19.
    if [ -f "$out/bench/packed/first_kernel" ]; then
        mkdir -p "$out/bench/packed_release"
        if "$FP" repack "$out/bench/packed/first_kernel" -o "$out/bench/packed_release/first_kernel" --level 19 \
            >"$work/logs/brepack.log" 2>&1; then
            echo "bench/packed_release OK std packed+repack19" >>"$status_file"
        else
            echo "bench/packed_release FAILED (see $work/logs/brepack.log)" >>"$status_file"
            failed+=("bench/packed_release")
        fi
        # A release store: solid groups (store format 1.1).
        mkdir -p "$out/bench/packed_solid"
        if "$FP" repack "$out/bench/packed/first_kernel" -o "$out/bench/packed_solid/first_kernel" --release \
            >"$work/logs/bsolid.log" 2>&1; then
            echo "bench/packed_solid OK std packed+repack-release" >>"$status_file"
        else
            echo "bench/packed_solid FAILED (see $work/logs/bsolid.log)" >>"$status_file"
            failed+=("bench/packed_solid")
        fi
    fi
    # What a 9.0 machine is shipped: the packed build pruned, or split with only its sm_90
    # pack installed; and the plain and tail builds pruned (the cut) without a relink.
    bench_derived() {  # NAME SOURCE-VARIANT how
        local name="$1" src="$2" how="$3" dir="$out/bench/$1"
        [ -f "$out/bench/$src/first_kernel" ] || return 0
        rm -rf "$dir" && mkdir -p "$dir"
        case $how in
        prune) "$FP" prune --keep sm_90,compute_90 "$out/bench/$src/first_kernel" -o "$dir/first_kernel" ;;
        split) "$FP" split "$out/bench/$src/first_kernel" --into "$dir" &&
            find "$dir" -name '*.fatpack' ! -name '*.sm_90.fatpack' -delete ;;
        esac >"$work/logs/bderived_$name.log" 2>&1
        if [ -x "$dir/first_kernel" ]; then
            # check_build.py reads the second field: pruned90 means sm_90 and compute_90 only.
            local set=std
            [ "$how" = prune ] && set=pruned90
            echo "bench/$name OK $set $src+$how" >>"$status_file"
        else
            echo "bench/$name FAILED (see $work/logs/bderived_$name.log)" >>"$status_file"
            failed+=("bench/$name")
        fi
    }
    bench_derived packed_pruned packed prune
    bench_derived packed_split90 packed split
    bench_derived plain_pruned plain prune
    bench_derived tail_pruned tail prune
fi

# --- check what was built, here (no GPU needed) ----------------------------------------------
echo
echo "build.sh: checking the outputs"
# A fake libcuda.so.1 (the runtime's test double: device capabilities only) lets the checks
# watch the runtime choose entries and read the store with no GPU.
fake_dir=""
fake_src="$root/tests/fake/fakecuda.c"
if [ -f "$fake_src" ] && mkdir -p "$work/fakecuda" &&
    gcc -shared -fPIC -O2 -o "$work/fakecuda/libcuda.so.1" "$fake_src" >"$work/logs/fakecuda.log" 2>&1; then
    fake_dir="$work/fakecuda"
else
    echo "build.sh: no fake libcuda ($fake_src); runtime selection is not checked here" >&2
fi
python3 "$here/check_build.py" "$out" "$FP" "$fake_dir" | tee "$work/BUILD_CHECK.txt"
check_rc=${PIPESTATUS[0]}
cp "$work/BUILD_CHECK.txt" "$out/BUILD_CHECK.txt"

{
    echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "git: $(git -C "$root" rev-parse --short HEAD 2>/dev/null) $(git -C "$root" status --porcelain 2>/dev/null | wc -l) uncommitted changes"
    echo "fatpack: $("$FP" --version 2>/dev/null | head -1) ($fp_src)"
    echo "nvcc: $(nvcc --version | tail -2 | head -1)"
} >"$out/BUILD_INFO.txt"

# The scripts that run there travel along (run.sh prefers the repo's copies next to it).
cp "$here/run.sh" "$here/tamper.py" "$here/bench/bench.py" "$out/"

# One compressed file to carry: the variants share most bytes (cudart, runtime), xz finds them.
echo "build.sh: packing $out.tar.xz"
tar -C "$(dirname "$out")" -cJf "$out.tar.xz" "$(basename "$out")" || { echo "build.sh: tar failed" >&2; failed+=(tarball); }

echo
echo "build.sh: $(du -sh "$out" | cut -f1) in $out; $(du -h "$out.tar.xz" 2>/dev/null | cut -f1) in $out.tar.xz"
cat "$status_file"
if [ ${#failed[@]} -gt 0 ] || [ "$check_rc" != 0 ]; then
    echo "build.sh: FAILED: ${failed[*]:-} $([ "$check_rc" != 0 ] && echo '(output checks failed)')" >&2
    exit 1
fi
[ ${#workarounds[@]} -gt 0 ] && echo "build.sh: built with a workaround for a fatpack ld failure: ${workarounds[*]}" >&2
echo "build.sh: all variants built"
