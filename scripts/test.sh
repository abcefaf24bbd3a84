#!/usr/bin/env bash
# The whole test suite: formatting, lints, the three install paths (cargo install, cargo
# build, the Python wheel), and every test against real nvcc 13 output.
# Installs the Debian packages the tests use when run as root, else names them and stops
# (scripts/test-deps.sh), and the CUDA toolchain from PyPI on first use (scripts/cuda-env.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/test-deps.sh
source scripts/cuda-env.sh
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The runtime as fatpack embeds it: without std (its allocator, panic handler, C-library calls).
cargo clippy -p fatpack-rt -p cubin-store --no-default-features --profile rt --locked -- -D warnings
# No function of shipped code over 120 lines (tests and benches aside).
python3 scripts/long-functions.py --limit 120 src format/src cubin-store/src runtime/src
# No import cycle among sibling modules anywhere in the CLI, the runtime, fatpack-format and
# cubin-store (crate::, super:: and self:: paths; the link's steps, the package readers, the
# ELF layer below the scan and the transforms above it all included). First, that the check
# sees a cycle: a crate of two modules naming each other must fail it.
cycle_crate=$(mktemp -d)
printf 'mod a;\nmod b;\n' > "$cycle_crate/lib.rs"
printf 'pub fn f() { crate::b::g() }\n' > "$cycle_crate/a.rs"
printf 'use super::a;\npub fn g() { a::f() }\n' > "$cycle_crate/b.rs"
if python3 scripts/module-cycles.py "$cycle_crate/lib.rs" >/dev/null 2>&1; then
    echo "module-cycles.py does not see a cycle" >&2; exit 1
fi
# Without the cycle (b names a, a names nothing) it passes, unless a and b are commands.
printf 'pub fn f() {}\n' > "$cycle_crate/a.rs"
python3 scripts/module-cycles.py "$cycle_crate/lib.rs" >/dev/null
if python3 scripts/module-cycles.py --independent=a,b "$cycle_crate/lib.rs" >/dev/null 2>&1; then
    echo "module-cycles.py does not see a command importing another" >&2; exit 1
fi
rm -rf "$cycle_crate"
# And no command imports another: each is a library module over shared layers (selection,
# package, packed, transform, ...), and main.rs parses and dispatches.
python3 scripts/module-cycles.py --independent=extract,inspect,link,prune,repack,run,split
# (`if`, not `!`: under `set -e` a negated command that fails does not stop the script.)
if grep -rn 'crate::prune' src/link; then echo "src/link imports prune" >&2; exit 1; fi
# No ELF or wire field read or written by hand-counted offset (src/elf and wire_layout! do it).
if grep -rn 'expect("8")\|h\[[0-9]*\.\.[0-9]*\]' src format; then
    echo "a field read by a hand-counted offset (above)" >&2
    exit 1
fi
bash scripts/check-install.sh
# The README's first command: the main job on the sample inputs (fast once built).
bash scripts/demo.sh
# Every failing test reported, not only the first failing test binary's.
cargo test --workspace --locked --no-fail-fast
# Every crate packages and builds from its package alone, as from crates.io (fatpack's
# build script then makes the runtime from the sources rt-sources/ carries).
# cargo unpacks them from its temporary registry into <CARGO_HOME>/registry/src/-<hash of
# that registry's path>/ and reuses what it finds there: a run from the same folder before
# would otherwise verify that run's sources, not these.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/{fatpack,fatpack-format,cubin-store,fatpack-rt}-[0-9]*
cargo publish --workspace --dry-run --locked --allow-dirty --quiet
