#!/usr/bin/env bash
# Release build of the fatpack CLI: `target/release/fatpack`, self-contained (build.rs builds
# the runtime archive with the size-optimised `rt` profile and embeds it). The same as
# `cargo install --path .`, without installing.
set -euo pipefail
cd "$(dirname "$0")/.."
# Progress shown: a first build takes minutes (the runtime is built too).
echo "build.sh: cargo build --release (target/release/fatpack)" >&2
cargo build --release --locked -p fatpack
