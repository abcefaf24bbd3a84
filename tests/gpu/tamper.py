#!/usr/bin/env python3
"""Finds and damages the fatpack store of a packed ELF file (pure Python: no readelf needed).

    tamper.py section FILE                    prints "OFFSET SIZE" of the .fatpack section
    tamper.py flip FILE header                flips a byte of the store header's index digest
    tamper.py flip FILE middle                flips the byte in the middle of the section
    tamper.py flip FILE blob MODULE CAP       flips a byte in the middle of the stored bytes of
                                              the entry the runtime picks for compute
                                              capability CAP (e.g. 90) in the module whose
                                              name's basename starts with MODULE (e.g. a.o#)
    tamper.py flip FILE.fatpack ...           the same on a side-file store (whole file)

Store layout: cubin-store/FORMAT.md. Prints what it changed.
"""
import struct
import sys


def find_section(data, name):
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise SystemExit("not a little-endian ELF64 file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    secs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    stroff = secs[shstrndx][4]
    for s in secs:
        end = data.index(b"\0", stroff + s[0])
        if data[stroff + s[0]:end].decode() == name:
            return s[4], s[5]
    return None


def store_range(path, data):
    if path.endswith(".fatpack"):
        return 0, len(data)
    r = find_section(data, ".fatpack")
    if r is None:
        raise SystemExit(f"{path}: no .fatpack section")
    return r


def pick_blob(data, base, module, cap):
    assert data[base:base + 8] == b"FPSTORE\0", "no store magic"
    index_off, index_len = struct.unpack_from("<QQ", data, base + 0x18)
    ix = base + index_off
    module_count, entry_count, blob_count, _, pool_len = struct.unpack_from("<IIIIQ", data, ix)
    blobs_at = ix + 24
    mods_at = blobs_at + 64 * blob_count
    ents_at = mods_at + 16 * module_count
    pool_at = ents_at + 24 * entry_count
    for m in range(module_count):
        name_off, name_len, first, count = struct.unpack_from("<IIII", data, mods_at + 16 * m)
        name = data[pool_at + name_off:pool_at + name_off + name_len].decode()
        if not name.rsplit("/", 1)[-1].startswith(module):
            continue
        best = None
        for e in range(first, first + count):
            kind, variant, _, arch, blob = struct.unpack_from("<BBHII", data, ents_at + 24 * e)
            # The runtime's choice, simplified: exact SASS, else same-major lower SASS, else newest PTX <= cap.
            if kind == 0 and variant != 1 and arch // 10 == cap // 10 and arch <= cap:
                rank = (2, arch)
            elif kind == 1 and variant == 0 and arch <= cap:
                rank = (1, arch)
            else:
                continue
            if best is None or rank > best[0]:
                best = (rank, blob, kind, arch)
        if best is None:
            raise SystemExit(f"module {name}: no entry for capability {cap}")
        _, blob, kind, arch = best
        off, stored, raw = struct.unpack_from("<QQQ", data, blobs_at + 64 * blob)
        what = f"{'sm' if kind == 0 else 'compute'}_{arch} of module {name} (blob {blob}, {stored} bytes stored)"
        return base + off + stored // 2, what
    raise SystemExit(f"no module named {module}* in the store")


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "section":
        data = open(sys.argv[2], "rb").read()
        r = find_section(data, ".fatpack")
        if r is None:
            raise SystemExit(1)
        print(r[0], r[1])
        return
    if len(sys.argv) < 4 or sys.argv[1] != "flip":
        raise SystemExit(__doc__)
    path, mode = sys.argv[2], sys.argv[3]
    data = bytearray(open(path, "rb").read())
    base, size = store_range(path, data)
    if mode == "header":
        at, what = base + 0x40 + 5, "a byte of the store header (index digest)"
    elif mode == "middle":
        at, what = base + size // 2, "the middle byte of the store"
    elif mode == "blob":
        at, what = pick_blob(data, base, sys.argv[4], int(sys.argv[5]))
        what = "a byte in the middle of " + what
    else:
        raise SystemExit(__doc__)
    data[at] ^= 0xFF
    open(path, "wb").write(data)
    print(f"flipped {what} at file offset {at:#x} (store at {base:#x}, {size} bytes)")


main()
