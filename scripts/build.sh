#!/usr/bin/env bash
# Release build of the fatpack CLI and its runtime. The runtime archive is built with the
# size-optimised `rt` profile and stripped of debug info, then put where fatpack looks for
# it (`<bin>/../lib/fatpack/libfatpack_rt.a`, the installed layout).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --locked -q -p fatpack
cargo build --profile rt --locked -q -p fatpack-rt
mkdir -p target/lib/fatpack
objcopy --strip-debug target/rt/libfatpack_rt.a target/lib/fatpack/libfatpack_rt.a
