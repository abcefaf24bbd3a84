"""Writes the hostile-package corpus: for every package format fatpack prunes (wheel,
.conda, .tar.bz2, deb, folder), one package per class of attack or damage, written as an
attacker would (by hand: each container's bytes laid out here, with its manifest, RECORD,
paths.json or md5sums, made to vouch for everything but the one flaw the case is about).

argv: OUT FAT_ELF. Writes OUT/<format>/<case>/<package> and OUT/cases.json:
[{"format", "case", "path", "want": [substring, ...]}]: prune must refuse the package with
exit 1, naming it and one of `want`, write nothing and leave it as it was.
Needs `zstandard` (for .conda) beside the standard library.
"""
import base64, bz2, gzip, hashlib, io, json, lzma, os, struct, sys, tarfile, zlib

import zstandard

OUT, FAT = sys.argv[1], sys.argv[2]
fat = open(FAT, "rb").read()
# A fat ELF file cut short: its section header table lies past the end.
truncated = fat[: len(fat) * 3 // 4]
cases = []


def case(fmt, name, path, *want):
    cases.append({"format": fmt, "case": name, "path": path, "want": list(want)})


def folder(fmt, name):
    d = os.path.join(OUT, fmt, name)
    os.makedirs(d, exist_ok=True)
    return d


# ---------------------------------------------------------------- zip, laid out by hand


def local_header(name, data, crc=None):
    crc = zlib.crc32(data) if crc is None else crc
    return struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 0, 0, 0x21, crc,
                       len(data), len(data), len(name), 0) + name


def nested(outer, inner, inner_data):
    """Two members sharing bytes: `outer`'s data holds `inner`'s local header and data,
    and the central directory lists both (each with its own name: no mismatch to see)."""
    body = local_header(inner.encode(), inner_data) + inner_data
    return [{"name": outer, "data": body},
            {"name": inner, "data": inner_data, "inside": 30 + len(outer.encode())}]


def zip_bytes(entries, overlap=None):
    """A stored zip of `entries`: dicts with name, data, and optionally mode (st_mode),
    crc (a forged CRC-32), local_name (a different name in the local header), inside (the
    entry lies in the previous one's local entry, this many bytes in).
    `overlap=(i, j)`: entry j's central record points at entry i's local header."""
    out = io.BytesIO()
    central = []
    offsets = []
    for e in entries:
        data = e["data"]
        crc = e.get("crc", zlib.crc32(data))
        name = e["name"].encode()
        local_name = e.get("local_name", e["name"]).encode()
        if "inside" in e:
            offsets.append(offsets[-1] + e["inside"])
        else:
            offsets.append(out.tell())
            out.write(local_header(local_name, data, crc) + data)
        central.append((name, crc, len(data), e.get("mode", 0o100644)))
    start = out.tell()
    for i, (name, crc, size, mode) in enumerate(central):
        at = offsets[i]
        if overlap and i == overlap[1]:
            at = offsets[overlap[0]]
        out.write(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 0x031E, 20, 0, 0, 0, 0x21,
                              crc, size, size, len(name), 0, 0, 0, 0, mode << 16, at))
        out.write(name)
    end = out.tell()
    out.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(central), len(central),
                          end - start, start, 0))
    return out.getvalue()


def b64(d):
    return base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()


def wheel(name, members, record_extra=(), record=True, **layout):
    """A wheel cutfix-1.0 of `members` (dicts as zip_bytes takes, `symlink` for a link,
    `unlisted`/`bad_hash` to spoil RECORD)."""
    info = "cutfix-1.0.dist-info"
    members = list(members) + [
        {"name": f"{info}/METADATA", "data": b"Metadata-Version: 2.1\nName: cutfix\nVersion: 1.0\n"},
        {"name": f"{info}/WHEEL", "data": b"Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n"},
    ]
    lines = []
    for m in members:
        if "symlink" in m:
            m["data"] = m["symlink"].encode()
            m["mode"] = 0o120777
        if not m.get("unlisted"):
            digest = b64(m["data"])
            if m.get("bad_hash"):
                digest = ("A" if digest[0] != "A" else "B") + digest[1:]
            lines.append(f"{m['name']},sha256={digest},{len(m['data'])}")
    lines += list(record_extra)
    if record:
        lines.append(f"{info}/RECORD,,")
        members.append({"name": f"{info}/RECORD", "data": ("\n".join(lines) + "\n").encode()})
    d = folder("wheel", name)
    path = os.path.join(d, "cutfix-1.0-py3-none-linux_x86_64.whl")
    open(path, "wb").write(zip_bytes(members, **layout))
    return path


def lib(**kw):
    return dict({"name": "cutfix/libcut.so", "data": fat, "mode": 0o100755}, **kw)


W = "wheel"
case(W, "dotdot", wheel("dotdot", [lib(), {"name": "../escape", "data": b"x"}]), "`..` component")
case(W, "absolute-name", wheel("absolute-name", [lib(), {"name": "/abs/x", "data": b"x"}]), "absolute path")
case(W, "duplicate", wheel("duplicate", [lib(), {"name": "cutfix/a.py", "data": b"1"}, {"name": "cutfix/a.py", "data": b"2", "unlisted": True}]), "twice")
case(W, "hash", wheel("hash", [lib(bad_hash=True)]), "cutfix/libcut.so does not match RECORD")
case(W, "unlisted", wheel("unlisted", [lib(), {"name": "cutfix/x.py", "data": b"x", "unlisted": True}]), "cutfix/x.py is not in RECORD")
case(W, "link-out", wheel("link-out", [lib(), {"name": "cutfix/p", "symlink": "../../../etc/passwd"}]), "outside the package")
case(W, "link-absolute", wheel("link-absolute", [lib(), {"name": "cutfix/p", "symlink": "/etc/passwd"}]), "absolute path")
case(W, "link-chain", wheel("link-chain", [lib(), {"name": "cutfix/l2", "symlink": ".."}, {"name": "cutfix/l1", "symlink": "l2/../.."}]), "cutfix/l1")
case(W, "through-link", wheel("through-link", [lib(), {"name": "cutfix/d", "symlink": "sub"}, {"name": "cutfix/d/x.so", "data": b"x"}]), "lies under cutfix/d")
case(W, "crc", wheel("crc", [lib(crc=zlib.crc32(fat) ^ 1)]), "checksum")
case(W, "name-mismatch", wheel("name-mismatch", [lib(), {"name": "cutfix/a.py", "data": b"1", "local_name": "cutfix/b.py"}]), "local header names")
# Entry 1's central record points at entry 0's bytes: two names, one body.
case(W, "overlap", wheel("overlap", [lib(), {"name": "cutfix/libcut2.so", "data": b""}], overlap=(0, 1)), "local header names", "share bytes")
case(W, "nested", wheel("nested", [lib()] + nested("cutfix/outer.bin", "cutfix/inner.py", b"x = 1\n")), "share bytes")
case(W, "truncated-elf", wheel("truncated-elf", [lib(data=truncated)]), "cutfix/libcut.so", "damaged ELF")

# ---------------------------------------------------------------- tar, for conda and deb


def tar_bytes(entries, mode="w"):
    """A tar of `entries`: dicts with name and data, or symlink / hardlink / dir."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode=mode, format=tarfile.GNU_FORMAT) as t:
        for e in entries:
            ti = tarfile.TarInfo(e["name"])
            ti.mtime = 1700000000
            if "symlink" in e:
                ti.type, ti.linkname = tarfile.SYMTYPE, e["symlink"]
                t.addfile(ti)
            elif "hardlink" in e:
                ti.type, ti.linkname = tarfile.LNKTYPE, e["hardlink"]
                t.addfile(ti)
            elif e.get("dir"):
                ti.type, ti.mode = tarfile.DIRTYPE, 0o755
                t.addfile(ti)
            else:
                ti.size, ti.mode = len(e["data"]), e.get("mode", 0o644)
                t.addfile(ti, io.BytesIO(e["data"]))
    return out.getvalue()


def sha(d):
    return hashlib.sha256(d).hexdigest()


def conda(name, files, fmt=".conda", index=None, paths_extra=(), stem=None, spoil=None):
    """A conda package cutfix-1.0-h0_0 of `files` (tar entries, `unlisted`/`bad_hash`/
    `path_entry` to spoil paths.json), index.json updated with `index`; `spoil(kind, bytes)`
    may damage the outer container's parts."""
    idx = {"name": "cutfix", "version": "1.0", "build": "h0_0", "build_number": 0,
           "depends": [], "subdir": "linux-64", "license": "MIT"}
    idx.update(index or {})
    paths = []
    by_name = {f["name"]: f for f in files if "data" in f}
    for f in files:
        if f.get("unlisted") or f.get("dir"):
            continue
        if "path_entry" in f:
            paths.append(f["path_entry"])
        elif "symlink" in f:
            paths.append({"_path": f["name"], "path_type": "softlink"})
        else:
            data = f["data"] if "data" in f else by_name.get(f["hardlink"], {}).get("data", b"")
            digest = sha(data)
            if f.get("bad_hash"):
                digest = ("0" if digest[0] != "0" else "1") + digest[1:]
            paths.append({"_path": f["name"], "path_type": "hardlink", "sha256": digest,
                          "size_in_bytes": len(data)})
    paths += list(paths_extra)
    info = [
        {"name": "info/index.json", "data": json.dumps(idx, indent=2, sort_keys=True).encode()},
        {"name": "info/paths.json", "data": json.dumps({"paths": paths, "paths_version": 1}).encode()},
    ]
    stem = stem or "cutfix-1.0-h0_0"
    d = folder(fmt.strip(".").replace(".", ""), name)
    path = os.path.join(d, stem + fmt)
    spoil = spoil or (lambda kind, b: b)
    if fmt == ".tar.bz2":
        open(path, "wb").write(spoil("bz2", bz2.compress(tar_bytes(files + info))))
    else:
        z = zstandard.ZstdCompressor(level=3)
        pkg = z.compress(tar_bytes(files))
        inf = z.compress(tar_bytes(info))
        outer = [
            {"name": "metadata.json", "data": b'{"conda_pkg_format_version": 2}'},
            {"name": f"pkg-{stem}.tar.zst", "data": pkg},
            {"name": f"info-{stem}.tar.zst", "data": inf},
        ]
        open(path, "wb").write(spoil("zip", zip_bytes(spoil("outer", outer))))
    return path


def clib(**kw):
    return dict({"name": "lib/libcut.so.1", "data": fat, "mode": 0o755}, **kw)


def forge_crc(kind, b):
    # The info archive's CRC-32 forged (what an altered licence with the old CRC looks like).
    if kind == "outer":
        b[2]["crc"] = zlib.crc32(b[2]["data"]) ^ 1
    return b


for fmt, F in [(".conda", "conda"), (".tar.bz2", "tarbz2")]:
    c = lambda name, files, **kw: conda(name, files, fmt=fmt, **kw)
    case(F, "dotdot", c("dotdot", [clib(), {"name": "../escape", "data": b"x"}]), "`..` component")
    case(F, "absolute-name", c("absolute-name", [clib(), {"name": "/abs/x", "data": b"x"}]), "absolute path")
    case(F, "duplicate", c("duplicate", [clib(), {"name": "lib/a", "data": b"1"}, {"name": "lib/a", "data": b"2", "unlisted": True}]), "twice")
    case(F, "hash", c("hash", [clib(bad_hash=True)]), "lib/libcut.so.1 does not match")
    case(F, "unlisted", c("unlisted", [clib(), {"name": "lib/x", "data": b"x", "unlisted": True}]), "lib/x is not in info/paths.json")
    case(F, "link-out", c("link-out", [clib(), {"name": "lib/p", "symlink": "../../etc/passwd"}]), "outside the package")
    case(F, "link-absolute", c("link-absolute", [clib(), {"name": "lib/p", "symlink": "/etc/passwd"}]), "absolute path")
    case(F, "link-chain", c("link-chain", [clib(), {"name": "lib/l2", "symlink": ".."}, {"name": "lib/l1", "symlink": "l2/.."}]), "lib/l1")
    case(F, "through-link", c("through-link", [clib(), {"name": "lib/d", "symlink": "."}, {"name": "lib/d/x.so", "data": b"x"}]), "lies under lib/d")
    case(F, "hardlink-hash", c("hardlink-hash", [clib(), {"name": "lib/libcut.so.1.0", "hardlink": "lib/libcut.so.1", "bad_hash": True}]), "lib/libcut.so.1.0 does not match")
    case(F, "hardlink-size0", c("hardlink-size0", [clib(), {"name": "lib/libcut.so.1.0", "hardlink": "lib/libcut.so.1", "path_entry": {"_path": "lib/libcut.so.1.0", "path_type": "hardlink", "sha256": sha(fat), "size_in_bytes": 0}}]), "lib/libcut.so.1.0 does not match")
    case(F, "hardlink-nowhere", c("hardlink-nowhere", [clib(), {"name": "lib/libcut.so.1.0", "hardlink": "lib/gone", "path_entry": {"_path": "lib/libcut.so.1.0", "path_type": "hardlink", "sha256": sha(b""), "size_in_bytes": 0}}]), "not a file before it")
    for n, v in [("build-number-huge", 2**64 - 1), ("build-number-negative", -5), ("build-number-string", "7"), ("build-number-float", 1e300)]:
        case(F, n, c(n, [clib()], index={"build_number": v}), "build_number")
    case(F, "name-escape", c("name-escape", [clib()], index={"name": "../../x"}), "index.json name")
    case(F, "name-newline", c("name-newline", [clib()], index={"name": "cut\nfix"}), "index.json name")
    case(F, "name-mismatch", c("name-mismatch", [clib()], index={"name": "other"}), "does not match its info/index.json")
    case(F, "truncated-elf", c("truncated-elf", [clib(data=truncated)]), "lib/libcut.so.1", "damaged ELF")

case("conda", "crc", conda("crc", [clib()], spoil=forge_crc), "checksum")
case("conda", "overlap", conda("overlap", [clib()], spoil=lambda k, b: b if k != "outer" else b[:1] + nested("extra.bin", b[1]["name"], b[1]["data"]) + b[2:]), "share bytes")
case("conda", "zip-name-mismatch", conda("zip-name-mismatch", [clib()], spoil=lambda k, b: b if k != "outer" else [b[0], b[1], dict(b[2], local_name="info-other.tar.zst")]), "local header names")


def bz2_block_crc(kind, b):
    # The first block's CRC (bytes 10-13: after `BZh9` and the block magic) forged.
    b = bytearray(b)
    b[10] ^= 1
    return bytes(b)


case("tarbz2", "crc", conda("crc", [clib()], fmt=".tar.bz2", spoil=bz2_block_crc), "CRC", "damaged or altered")


# ---------------------------------------------------------------- deb


def ar_member(name, data):
    h = f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{len(data):<10}`\n".encode()
    return h + data + (b"\n" if len(data) % 2 else b"")


def deb(name, files, control=None, sums=None, control_gz=None):
    """A deb libcut1 of data entries `files` (`unlisted`/`bad_hash` to spoil md5sums; names
    given without `./`), its control file from `control` (fields replaced)."""
    fields = {"Package": "libcut1", "Version": "1.0-1", "Architecture": "amd64",
              "Maintainer": "t <t@example.org>", "Description": "fat"}
    fields.update(control or {})
    ctext = "".join(f"{k}: {v}\n" for k, v in fields.items())
    lines = []
    by_name = {"./" + f["name"]: f for f in files if "data" in f}
    for f in files:
        data = f["data"] if "data" in f else by_name.get(f.get("hardlink"), {}).get("data")
        if data is not None and not f.get("unlisted"):
            digest = hashlib.md5(data).hexdigest()
            if f.get("bad_hash"):
                digest = ("0" if digest[0] != "0" else "1") + digest[1:]
            lines.append(f"{digest}  {f['name']}\n")
    ctrl = tar_bytes([{"name": "./", "dir": True},
                      {"name": "./control", "data": ctext.encode()},
                      {"name": "./md5sums", "data": (sums or "".join(lines)).encode()}])
    gz = gzip.compress(ctrl, mtime=0)
    if control_gz:
        gz = control_gz(gz)
    data_entries = [{"name": "./", "dir": True}] + [dict(f, name="./" + f["name"]) if not f["name"].startswith("/") else f for f in files]
    d = folder("deb", name)
    path = os.path.join(d, "libcut1_1.0-1_amd64.deb")
    open(path, "wb").write(b"!<arch>\n" + ar_member("debian-binary", b"2.0\n")
                           + ar_member("control.tar.gz", gz)
                           + ar_member("data.tar.xz", lzma.compress(tar_bytes(data_entries))))
    return path


def dlib(**kw):
    return dict({"name": "usr/lib/libcut.so.1", "data": fat, "mode": 0o755}, **kw)


def gzip_crc(gz):
    # gzip's trailer is CRC-32 then ISIZE: the CRC forged.
    gz = bytearray(gz)
    gz[-8] ^= 1
    return bytes(gz)


D = "deb"
case(D, "dotdot", deb("dotdot", [dlib(), {"name": "../escape", "data": b"x"}]), "`..` component")
case(D, "absolute-name", deb("absolute-name", [dlib(), {"name": "/abs/x", "data": b"x"}]), "absolute path")
case(D, "duplicate", deb("duplicate", [dlib(), {"name": "usr/a", "data": b"1"}, {"name": "usr/a", "data": b"2", "unlisted": True}]), "twice")
case(D, "hash", deb("hash", [dlib(bad_hash=True)]), "usr/lib/libcut.so.1 does not match md5sums")
case(D, "unlisted", deb("unlisted", [dlib(), {"name": "usr/x", "data": b"x", "unlisted": True}]), "usr/x is not in md5sums")
case(D, "link-out", deb("link-out", [dlib(), {"name": "usr/lib/p", "symlink": "../../../etc/passwd"}]), "outside the package")
case(D, "link-chain", deb("link-chain", [dlib(), {"name": "usr/l2", "symlink": ".."}, {"name": "usr/l1", "symlink": "l2/.."}]), "usr/l1")
case(D, "through-link", deb("through-link", [dlib(), {"name": "usr/lib/d", "symlink": "/tmp"}, {"name": "usr/lib/d/x.so", "data": b"x"}]), "lies under usr/lib/d")
case(D, "hardlink-nowhere", deb("hardlink-nowhere", [dlib(), {"name": "usr/lib/libcut.so.1.0", "hardlink": "./usr/lib/gone"}]), "not a file before it")
case(D, "control-crc", deb("control-crc", [dlib()], control={"Architecture": "aml64"}, control_gz=gzip_crc), "control.tar.gz")
for n, field, v in [("package-escape", "Package", "../escaped"), ("package-deep", "Package", "../../../x"),
                    ("version-slash", "Version", "1.0/../../x"), ("package-space", "Package", "lib cut"),
                    ("package-continued", "Package", "libcut1\n x"), ("architecture-bad", "Architecture", "aml64 i386")]:
    case(D, n, deb(n, [dlib()], control={field: v}), f"control {field}")
case(D, "truncated-elf", deb("truncated-elf", [dlib(data=truncated)]), "usr/lib/libcut.so.1", "damaged ELF")

# ---------------------------------------------------------------- folder
d = folder("folder", "truncated-elf")
os.makedirs(os.path.join(d, "prefix/lib"), exist_ok=True)
open(os.path.join(d, "prefix/lib/libcut.so.1"), "wb").write(truncated)
case("folder", "truncated-elf", os.path.join(d, "prefix"), "lib/libcut.so.1", "damaged ELF")

# ---------------------------------------------------------------- what must still pass
# Beside each refusal, the valid form it must not catch: prune writes these (exit 0).
valid = []
valid.append(conda("valid-hardlink", [clib(), {"name": "lib/libcut.so.1.0", "hardlink": "lib/libcut.so.1"},
                                      {"name": "lib/libcut.so", "symlink": "libcut.so.1"}]))
valid.append(conda("valid-hardlink", [clib(), {"name": "lib/libcut.so.1.0", "hardlink": "lib/libcut.so.1"}], fmt=".tar.bz2"))
valid.append(deb("valid-links", [dlib(), {"name": "usr/lib/libcut.so.1.0", "hardlink": "./usr/lib/libcut.so.1"},
                                 {"name": "usr/lib/libcut.so", "symlink": "libcut.so.1"},
                                 # Debian policy 10.5: absolute between top-level folders.
                                 {"name": "usr/lib/libgcc_s.so", "symlink": "/lib/x86_64-linux-gnu/libgcc_s.so.1"}]))
valid.append(wheel("valid-links", [lib(), {"name": "cutfix/libcut.so.1", "symlink": "libcut.so"}]))

json.dump(cases, open(os.path.join(OUT, "cases.json"), "w"), indent=1)
json.dump(valid, open(os.path.join(OUT, "valid.json"), "w"), indent=1)
print(len(cases))
