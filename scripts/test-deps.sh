#!/usr/bin/env bash
# The Debian packages the test suite runs (linkers, build systems, ELF tools, nix-bin for the
# Nix files). Run as root it installs the missing ones; otherwise it names them in one line
# and fails, so that no test later fails for a missing tool.
set -euo pipefail
pkgs=(cmake ninja-build make patchelf binutils lld mold elfutils libzstd-dev python3-venv
      strace bc time nix-bin man-db)
if ! command -v dpkg >/dev/null; then
    echo "test-deps.sh: not a Debian-like system; install the equivalents of: ${pkgs[*]}" >&2
    exit 0
fi
need=()
for pkg in "${pkgs[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "installing Debian packages the tests use: ${need[*]}" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
else
    echo "the tests need these Debian packages: sudo apt-get install ${need[*]}" >&2
    exit 1
fi
