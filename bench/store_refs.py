#!/usr/bin/env python3
"""Per-entry frames against one other entry (a zstd raw-content prefix), with the chain bounded:
what a default store could reach if an entry may be compressed against one *root* entry (an
entry stored alone), so that loading any entry decodes at most two frames.

  [FAMILY=1] python3 bench/store_refs.py DIR LEVEL [THRESHOLD]

DIR holds entries as `fatpack extract` writes them (<module>.<arch>.{cubin,ptx}). Needs the
`zstandard` module (zstd 1.5.x): `python3 -m venv V && V/bin/pip install zstandard`.

Prints MiB and the ratio to `alone` for:
  alone        each distinct entry one frame (what the default link writes, at LEVEL)
  chain        against the previous entry of its module, unbounded depth (the 2026-12-03 figure)
  root_module  against the latest root of its module (same kind); it becomes a root itself
               where that does not gain THRESHOLD (default 0.85 of alone)
  root_both    as root_module, but also against the latest root of the same arch in an earlier
               module; the smaller wins
and for the bounded forms the mean bytes decoded per entry load (itself plus its root).
FAMILY=1 keeps a module's references within one GPU family (sm_8x, sm_10x, ...). Results:
BENCHMARKS.md, "References with a bounded chain".
"""
import collections
import hashlib
import os
import re
import sys
from concurrent.futures import ProcessPoolExecutor

import zstandard as zs

NAME = re.compile(r"^(.*)\.(sm|compute)_(\d+)([af]?)\.(cubin|ptx)$")
LEVEL = 9


def alone(raw):
    return len(zs.ZstdCompressor(level=LEVEL, write_checksum=False).compress(raw))


def against(raw, base):
    d = zs.ZstdCompressionDict(base, dict_type=zs.DICT_TYPE_RAWCONTENT)
    p = zs.ZstdCompressionParameters.from_level(
        LEVEL, source_size=len(raw), window_log=27, write_checksum=0, write_dict_id=0)
    c = zs.ZstdCompressor(compression_params=p, dict_data=d)
    return len(c.compress(raw))


def modules(d):
    mods = collections.OrderedDict()
    for f in sorted(os.listdir(d)):
        m = NAME.match(f)
        if not m:
            continue
        key = (m.group(2), int(m.group(3)), m.group(4))
        mods.setdefault(m.group(1), []).append((key, os.path.join(d, f)))
    for v in mods.values():
        v.sort()
    return list(mods.items())


def one_module(args):
    """Everything that depends on one module alone: alone, chain, root_module sizes."""
    name, ents, threshold = args
    out = []
    prev = {}
    root = {}  # kind -> (raw, index in out)
    for key, path in ents:
        raw = open(path, "rb").read()
        digest = hashlib.blake2b(raw, digest_size=16).digest()
        a = alone(raw)
        # FAMILY=1: an entry's root must be of its GPU family (sm_8x, sm_10x, ...), which keeps
        # the packs `fatpack split` cuts per family independent.
        kind = (key[0], key[1] // 10) if os.environ.get("FAMILY") == "1" else key[0]
        chain = against(raw, prev[kind]) if kind in prev else a
        if kind in root:
            r = against(raw, root[kind][0])
            is_ref = r < threshold * a
        else:
            r, is_ref = a, False
        base_raw = 0
        if is_ref:
            base_raw = len(root[kind][0])
            out[root[kind][1]]["referenced"] = True
        else:
            root[kind] = (raw, len(out))
        prev[kind] = raw
        out.append(dict(key=key, path=path, digest=digest, raw=len(raw), alone=a,
                        chain=min(a, chain), root_module=r if is_ref else a,
                        base_raw=base_raw, is_root=not is_ref, referenced=False))
    return name, out


def main():
    d, level = sys.argv[1], int(sys.argv[2])
    threshold = float(sys.argv[3]) if len(sys.argv) > 3 else 0.85
    global LEVEL
    LEVEL = level
    mods = modules(d)
    with ProcessPoolExecutor(os.cpu_count()) as ex:
        results = list(ex.map(one_module, [(n, e, threshold) for n, e in mods], chunksize=4))
    # root_both: also the same-arch root of an earlier module, decided in module order (an
    # entry is a candidate only while it is a root in the final assignment).
    seen = set()
    tot = collections.Counter()
    dec = collections.Counter()
    last_root_of_arch = {}
    with ProcessPoolExecutor(os.cpu_count()) as ex:
        for name, ents in results:
            fresh = [e for e in ents if e["digest"] not in seen]
            seen.update(e["digest"] for e in fresh)
            # A root another entry of its module refers to stays a root (depth stays 1).
            jobs = [(e["path"], last_root_of_arch.get(e["key"]))
                    if not (e["is_root"] and e["referenced"]) else (e["path"], None)
                    for e in fresh]
            for e, (o, base_raw) in zip(fresh, ex.map(cross, jobs)):
                tot["raw"] += e["raw"]
                for k in ("alone", "chain", "root_module"):
                    tot[k] += e[k]
                dec["root_module"] += e["raw"] + e["base_raw"]
                dec["n"] += 1
                best, b, root = e["root_module"], e["base_raw"], e["is_root"]
                if o is not None and o < best and o < threshold * e["alone"]:
                    best, b, root = o, base_raw, False
                tot["root_both"] += best
                dec["root_both"] += e["raw"] + b
                if root:
                    last_root_of_arch[e["key"]] = e["path"]
    mib = lambda v: v / 2**20
    print(f"{os.path.basename(d.rstrip('/'))} level {level} threshold {threshold}: "
          f"{dec['n']} distinct entries, {mib(tot['raw']):.1f} MiB raw")
    for k in ("alone", "chain", "root_module", "root_both"):
        extra = ""
        if k in dec:
            extra = f", decoded per load {mib(dec[k] / dec['n']):.3f} MiB (alone {mib(tot['raw'] / dec['n']):.3f})"
        print(f"  {k:12} {mib(tot[k]):9.2f} MiB  {tot[k] / tot['alone']:.3f} of alone{extra}")


def cross(args):
    path, cand = args
    if cand is None:
        return None, 0
    raw = open(path, "rb").read()
    base = open(cand, "rb").read()
    # The candidate is a root only if the first pass kept it one; a root_both entry that
    # becomes a ref to it does not change which entries are roots (bounded depth holds).
    return against(raw, base), len(base)


if __name__ == "__main__":
    main()
