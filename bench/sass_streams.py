#!/usr/bin/env python3
"""Would splitting SASS instructions into byte streams help zstd? (an experiment, 2026-12-04)

    python3 bench/sass_streams.py MODE MIB CUBIN_DIR OUT_DIR

CUBIN_DIR: the sm_90 cubins `fatpack extract --arch sm_90` wrote (named ..._<n>.sm_90.cubin);
the first MIB MiB of them in module order, each .text section's 16-byte instructions split
into 16/MODE streams of MODE-byte fields (MODE 1, 4, 8; "raw": unchanged), written in groups
of up to 8 MiB to OUT_DIR/MODE/g<i>; compress each with `zstd -19 --long=23` and compare.
"""
import os, re, struct, sys
src = sys.argv[3]
files = sorted(os.listdir(src), key=lambda f: int(re.search(r"_(\d+)\.sm_90", f).group(1)))
LIMIT = int(sys.argv[2]) << 20
mode = sys.argv[1]
def sections(b):
    shoff, = struct.unpack_from("<Q", b, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", b, 0x3a)
    out = []
    shs = [struct.unpack_from("<IIQQQQIIQQ", b, shoff + i*shentsize) for i in range(shnum)]
    stroff = shs[shstrndx][4]
    for sh in shs:
        name = b[stroff+sh[0]: b.index(b"\0", stroff+sh[0])].decode()
        out.append((name, sh[1], sh[4], sh[5]))
    return out
def tr(data, k):
    # k-byte fields of 16-byte instructions -> 16/k streams
    n = len(data) // 16
    body = data[:n*16]
    streams = []
    for f in range(0, 16, k):
        streams.append(b"".join(body[i*16+f:i*16+f+k] for i in range(n)))
    return b"".join(streams) + data[n*16:]
total = 0; text = 0
groups = [bytearray()]
for f in files:
    b = bytearray(open(os.path.join(src, f), "rb").read())
    if mode != "raw":
        for name, typ, off, size in sections(b):
            if name.startswith(".text.") and typ == 1:
                text += size
                b[off:off+size] = tr(bytes(b[off:off+size]), int(mode))
    total += len(b)
    if len(groups[-1]) + len(b) > 8 << 20 and groups[-1]:
        groups.append(bytearray())
    groups[-1] += b
    if total > LIMIT: break
d = os.path.join(sys.argv[4], mode); os.makedirs(d, exist_ok=True)
for i, g in enumerate(groups):
    open(f"{d}/g{i}", "wb").write(g)
print(mode, "raw bytes", total, "text", text, "groups", len(groups))
