#!/usr/bin/env bash
# The build step of nix/prune-for.nix, plain bash (tested without Nix: tests/nix/prune-tree.sh).
#
#   prune-tree.sh SRC DST CAPS
#
# Copies the tree SRC (a store path: a file or a folder) to DST and prunes, in the copy,
# every ELF file that carries device code to what GPUs of compute capabilities CAPS
# (`8.9,9.0`) run (`fatpack prune --for`): packed outputs lose the other capabilities' code
# (their store is truncated), ordinary fat binaries have it cut out (the file shrinks; where
# a layout cannot be cut, or for fatbins a library loads itself, it is zeroed: holes). Files
# are never rewritten in place: each is pruned to a temp file and renamed over the copy.
# References to SRC inside the copy (RUNPATHs, scripts, pkg-config files, symlinks) are
# rewritten to DST, so the result does not keep the unpruned package alive; SRC and DST
# must have the same length (Nix store paths of the same name do).
#
# Environment: FATPACK (default: fatpack on PATH).
set -euo pipefail
src="$1" dst="$2" caps="$3"
fatpack="${FATPACK:-fatpack}"
if [ "${#src}" != "${#dst}" ]; then
    echo "prune-tree: $src and $dst differ in length; references cannot be rewritten in place" >&2
    exit 1
fi
cp -a --no-preserve=ownership "$src" "$dst"
chmod -R u+w "$dst"

# Symlinks that point into SRC point into DST instead.
while IFS= read -r -d '' l; do
    t="$(readlink "$l")"
    case "$t" in "$src"*) ln -sfn "$dst${t#"$src"}" "$l" ;; esac
done < <(find "$dst" -type l -print0)

# Same-length replacement of SRC by DST in every regular file that mentions it: byte for
# byte, so ELF offsets and string tables stay valid.
while IFS= read -r -d '' f; do
    python3 - "$f" "$src" "$dst" <<'PY'
import sys
path, old, new = sys.argv[1], sys.argv[2].encode(), sys.argv[3].encode()
data = open(path, "rb").read()
if old in data:
    open(path, "wb").write(data.replace(old, new))
PY
done < <(grep -rlFZ --binary-files=binary -- "$src" "$dst" 2>/dev/null || true)

pruned=0 kept=0
while IFS= read -r -d '' f; do
    # ELF only (magic), and only files with device code in them.
    [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ] || continue
    json="$("$fatpack" inspect --json "$f" 2>/dev/null)" || { kept=$((kept + 1)); continue; }
    if ! printf '%s' "$json" | python3 -c 'import json,sys; r=json.load(sys.stdin)[0]; sys.exit(0 if r["modules"] else 1)'; then
        continue
    fi
    tmp="$(dirname "$f")/.fatpack-prune.$$.$(basename "$f")"
    mode="$(stat -c %a "$f")"
    "$fatpack" prune --for "$caps" "$f" -o "$tmp"
    chmod "$mode" "$tmp"
    mv -f "$tmp" "$f"
    [ -e "$tmp.fatpack" ] && mv -f "$tmp.fatpack" "$f.fatpack"
    pruned=$((pruned + 1))
done < <(find "$dst" -type f ! -name '*.fatpack' -print0)
echo "prune-tree: $dst: pruned $pruned file(s) for compute capability $caps"
