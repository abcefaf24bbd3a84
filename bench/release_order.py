#!/usr/bin/env python3
"""Release-store groups: does the order of blobs inside a family change what solid groups of
N MiB reach? Every cubin of DIR (what `fatpack extract` writes: `<lib>_<module>.<arch>.cubin`
for a library, `lib<N>.o_<module>.<arch>.cubin` for a packed program) is put in its family
(sm_80/86/89 together, as src/store/groups.rs does), one blob per content, ordered one of
several ways, cut into groups of at most N MiB raw, and each group compressed as one zstd
frame (python-zstandard; LEVEL, window = the group, long-distance matching as the release
writer sets it). Sizes summed per ordering.

    V/bin/python bench/release_order.py DIR [GROUP_MIB=8] [LEVEL=19] [FAMILIES=all|8,9,...] [ORDERS]

ORDERS (comma-separated; default module,name,minhash): `module` (module order: what the
release writer does), `name` (by the cubin's sorted kernel names, so instantiations of one
template sit together), `minhash` (a greedy chain, each next blob the unplaced one whose
MinHash signature of 16-byte shingles, 64 hash functions, is closest to the last placed),
`oph` (the same chain over one-permutation signatures: what the reverted
`repack --group-order similar` computed, commit 93f1bb8).

The extract of a library holds what it keeps outside .nv_fatbin too (cuBLASLt 13: 299
entries, most of family 10.x), which a link's store does not; extract the packed program
(`fatpack extract -o DIR packed`) for what a release store holds.
"""
import os
import re
import struct
import sys
import time
import zlib

import numpy as np
import zstandard as z

d = sys.argv[1]
group_mib = float(sys.argv[2]) if len(sys.argv) > 2 else 8
level = int(sys.argv[3]) if len(sys.argv) > 3 else 19
only = sys.argv[4] if len(sys.argv) > 4 else "all"
orders = (sys.argv[5] if len(sys.argv) > 5 else "module,name,minhash").split(",")


def kernel_names(b):
    """Names of the cubin's FUNC symbols, sorted (ELF64 little-endian)."""
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", b, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i * shentsize) for i in range(shnum)]
    names = []
    for s in secs:
        if s[1] != 2:  # SHT_SYMTAB
            continue
        strtab = secs[s[6]]
        for off in range(s[4], s[4] + s[5], 24):
            name, info = struct.unpack_from("<IB", b, off)
            if info & 0xF == 2 and name:
                start = strtab[4] + name
                names.append(b[start:b.index(b"\0", start)])
    return sorted(names)


PERM = 64
rng = np.random.default_rng(1)
A = rng.integers(1, 2**61 - 1, PERM, dtype=np.uint64) | np.uint64(1)
B = rng.integers(0, 2**61 - 1, PERM, dtype=np.uint64)


def signature(b):
    """MinHash of the cubin's 16-byte shingles at 8-byte steps (SASS instructions are 16
    bytes), over at most 64 K shingles."""
    a = np.frombuffer(b[: len(b) // 16 * 16], dtype=np.uint64)
    if len(a) < 2:
        return np.zeros(PERM, dtype=np.uint64)
    h = a[:-1] * np.uint64(0x9E3779B97F4A7C15) ^ a[1:]
    if len(h) > 65536:
        h = h[:: len(h) // 65536 + 1]
    return ((h[None, :] * A[:, None] + B[:, None])).min(axis=1)


M64 = (1 << 64) - 1


def mix(x):
    """splitmix64's finaliser, on numpy uint64 arrays."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def oph_signature(b):
    """What commit 93f1bb8's src/store/similar.rs computed: one hash per shingle, the least
    in each of 64 bins."""
    a = np.frombuffer(b[: len(b) // 8 * 8], dtype=np.uint64)
    sig = np.full(64, np.uint64(M64), dtype=np.uint64)
    if len(a) < 2:
        return sig
    n = len(a) - 1
    step = n // 131072 + 1
    idx = np.arange(0, n, step)
    h = mix(a[idx] * np.uint64(0x9E3779B97F4A7C15) ^ a[idx + 1])
    bins = (h >> np.uint64(58)).astype(np.int64)
    vals = h & np.uint64(M64 >> 6)
    np.minimum.at(sig, bins, vals)
    return sig


def greedy_chain(sig, empty):
    """Blob indices from the first on, each next the unplaced blob with the most signature
    entries equal to the last placed one's (entries marked empty do not count), the first in
    module order on ties."""
    left = np.ones(len(sig), dtype=bool)
    chain = [0]
    left[0] = False
    for _ in range(len(sig) - 1):
        sim = ((sig == sig[chain[-1]]) & ~empty).sum(axis=1)
        sim[~left] = -1
        nxt = int(sim.argmax())
        chain.append(nxt)
        left[nxt] = False
    return chain


files = sorted(f for f in os.listdir(d) if f.endswith(".cubin"))
fams = {}
for f in files:
    m = re.match(r"(?:.*?(\d+)\.o)?.*_(\d+)(?:~(\d+))?\.sm_(\d+)([af]?)\.cubin$", f)
    if not m:
        continue
    # `lib<N>.o_<i>`: the extract of a packed program (module i of object N); else `<lib>_<i>`.
    mod = (int(m.group(1) or 0), int(m.group(2)))
    dup, arch = int(m.group(3) or 0), int(m.group(4))
    fam = arch // 10
    if only != "all" and str(fam) not in only.split(","):
        continue
    fams.setdefault(fam, []).append(((mod, dup, arch, m.group(5)), f))

total = {o: 0 for o in orders}
raw_all = 0
for fam, items in sorted(fams.items()):
    items.sort()
    blobs = [open(os.path.join(d, f), "rb").read() for _, f in items]
    # One blob per content, as the store deduplicates.
    seen, uniq = set(), []
    for b in blobs:
        k = zlib.crc32(b), len(b)
        if k not in seen:
            seen.add(k)
            uniq.append(b)
    blobs = uniq
    raw = sum(map(len, blobs))
    raw_all += raw
    idx = {}
    idx["module"] = list(range(len(blobs)))
    if "name" in orders:
        names = [kernel_names(b) for b in blobs]
        idx["name"] = sorted(range(len(blobs)), key=lambda i: (names[i], i))
    if "minhash" in orders:
        sig = np.stack([signature(b) for b in blobs])
        idx["minhash"] = greedy_chain(sig, np.zeros_like(sig, dtype=bool))
    if "oph" in orders:
        sig = np.stack([oph_signature(b) for b in blobs])
        idx["oph"] = greedy_chain(sig, sig == np.uint64(M64))
    cap = group_mib * 2**20
    line = [f"family {fam}x: {len(blobs)} blobs, {raw / 2**20:.1f} MiB"]
    for o in orders:
        groups, cur, n = [], [], 0
        for i in idx[o]:
            if cur and n + len(blobs[i]) > cap:
                groups.append(cur)
                cur, n = [], 0
            cur.append(i)
            n += len(blobs[i])
        if cur:
            groups.append(cur)
        size, t = 0, time.process_time()
        for g in groups:
            data = b"".join(blobs[i] for i in g)
            wlog = max(10, min(27, (len(data) - 1).bit_length()))
            p = z.ZstdCompressionParameters.from_level(
                level, source_size=len(data), window_log=wlog, enable_ldm=True
            )
            size += len(z.ZstdCompressor(compression_params=p).compress(data))
        total[o] += size
        line.append(f"{o} {size / 2**20:.2f} MiB ({time.process_time() - t:.0f} s)")
    print("; ".join(line), flush=True)
print(f"all: {raw_all / 2**20:.1f} MiB raw, groups of {group_mib} MiB, level {level}")
for o in orders:
    print(f"  {o:<8} {total[o] / 2**20:9.2f} MiB  {total[o] / total['module']:.3f} of module order")
