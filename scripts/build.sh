#!/usr/bin/env bash
# Release build of the fatpack CLI and its runtime. The runtime archive is built with the
# size-optimised `rt` profile and stripped of debug info, then put where fatpack looks for
# it (`<bin>/../lib/fatpack/libfatpack_rt.a`, the installed layout).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -q -p fatpack
# `cargo rustc --crate-type staticlib` gets the LTO'd archive (one object exporting only the
# runtime's entry points); a plain build of both crate types skips LTO.
cargo rustc --profile rt --locked -q -p fatpack-rt --crate-type staticlib
mkdir -p target/lib/fatpack
objcopy --strip-debug target/rt/libfatpack_rt.a target/lib/fatpack/libfatpack_rt.a
