"""Writes a valid package holding one big member, streamed (never held whole): the input of
the bounded-memory checks.

argv: OUT FORMAT KIND MIB FAT_ELF
FORMAT: wheel | conda | tarbz2 | deb. KIND: elf (the fat ELF file with MIB MiB of zeros
after it, as debug info or data past the sections sits) | data (MIB MiB of zeros beside
the fat ELF file). Prints the package's path. Needs `zstandard` for conda.
"""
import base64, bz2, gzip, hashlib, io, json, os, shutil, sys, tarfile, tempfile, zipfile

OUT, FORMAT, KIND, MIB, FAT = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
os.makedirs(OUT, exist_ok=True)
work = tempfile.mkdtemp(dir=OUT)
fat = open(FAT, "rb").read()


def zeros_into(f, mib):
    block = bytes(1 << 20)
    for _ in range(mib):
        f.write(block)


# The member files, on disk.
members = []
lib = os.path.join(work, "libcut.so.1")
with open(lib, "wb") as f:
    f.write(fat)
    if KIND == "elf":
        zeros_into(f, MIB)
members.append(("lib/libcut.so.1", lib, 0o755))
if KIND == "data":
    data = os.path.join(work, "zeros.bin")
    with open(data, "wb") as f:
        zeros_into(f, MIB)
    members.append(("share/cutfix/zeros.bin", data, 0o644))


def digest(path, algo):
    h = hashlib.new(algo)
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h


def tar_into(fileobj, entries, mode):
    with tarfile.open(fileobj=fileobj, mode=mode, format=tarfile.GNU_FORMAT) as t:
        for name, path, perm in entries:
            ti = t.gettarinfo(path, name)
            ti.mode, ti.mtime, ti.uid, ti.gid, ti.uname, ti.gname = perm, 1700000000, 0, 0, "", ""
            with open(path, "rb") as f:
                t.addfile(ti, f)


def small(name, text):
    p = os.path.join(work, name.replace("/", "_"))
    open(p, "w").write(text)
    return p


if FORMAT == "wheel":
    info = "cutfix-1.0.dist-info"
    meta = [(f"{info}/METADATA", small("METADATA", "Metadata-Version: 2.1\nName: cutfix\nVersion: 1.0\n"), 0o644),
            (f"{info}/WHEEL", small("WHEEL", "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: false\nTag: py3-none-linux_x86_64\n"), 0o644)]
    entries = [("cutfix/" + n.split("/")[-1], p, m) for n, p, m in members] + meta
    path = os.path.join(OUT, "cutfix-1.0-py3-none-linux_x86_64.whl")
    record = []
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, allowZip64=True) as z:
        for name, p, mode in entries:
            zi = zipfile.ZipInfo(name, (2024, 1, 1, 0, 0, 0))
            zi.external_attr = (0o100000 | mode) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            with open(p, "rb") as f, z.open(zi, "w", force_zip64=True) as out:
                shutil.copyfileobj(f, out, 1 << 20)
            d = base64.urlsafe_b64encode(digest(p, "sha256").digest()).rstrip(b"=").decode()
            record.append(f"{name},sha256={d},{os.path.getsize(p)}")
        record.append(f"{info}/RECORD,,")
        z.writestr(f"{info}/RECORD", "\n".join(record) + "\n")
elif FORMAT in ("conda", "tarbz2"):
    paths = [{"_path": n, "path_type": "hardlink", "sha256": digest(p, "sha256").hexdigest(),
              "size_in_bytes": os.path.getsize(p)} for n, p, _ in members]
    index = {"name": "cutfix", "version": "1.0", "build": "h0_0", "build_number": 0,
             "depends": [], "subdir": "linux-64", "license": "MIT"}
    info = [("info/index.json", small("index.json", json.dumps(index)), 0o644),
            ("info/paths.json", small("paths.json", json.dumps({"paths": paths, "paths_version": 1})), 0o644)]
    stem = "cutfix-1.0-h0_0"
    if FORMAT == "tarbz2":
        path = os.path.join(OUT, stem + ".tar.bz2")
        with open(path, "wb") as f:
            tar_into(f, members + info, "w:bz2")
    else:
        import zstandard
        path = os.path.join(OUT, stem + ".conda")
        parts = []
        for part, entries in [("pkg", members), ("info", info)]:
            p = os.path.join(work, f"{part}-{stem}.tar.zst")
            with open(p, "wb") as raw:
                with zstandard.ZstdCompressor(level=3).stream_writer(raw) as w:
                    tar_into(w, entries, "w|")
            parts.append((f"{part}-{stem}.tar.zst", p))
        with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as z:
            z.writestr("metadata.json", '{"conda_pkg_format_version": 2}')
            for name, p in parts:
                z.write(p, name)
elif FORMAT == "deb":
    data = [("./usr/" + n, p, m) for n, p, m in members]
    sums = "".join(f"{digest(p, 'md5').hexdigest()}  {n[2:]}\n" for n, p, _ in data)
    control = "Package: libcut1\nVersion: 1.0-1\nArchitecture: amd64\nMaintainer: t <t@example.org>\nDescription: fat\n"
    ctl = io.BytesIO()
    tar_into(ctl, [("./control", small("control", control), 0o644), ("./md5sums", small("md5sums", sums), 0o644)], "w")
    dpath = os.path.join(work, "data.tar.gz")
    with open(dpath, "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1, mtime=0) as g:
            tar_into(g, data, "w|")
    path = os.path.join(OUT, "libcut1_1.0-1_amd64.deb")

    def member(f, name, body_path=None, body=None):
        size = os.path.getsize(body_path) if body_path else len(body)
        f.write(f"{name:<16}{0:<12}{0:<6}{0:<6}{100644:<8}{size:<10}`\n".encode())
        if body_path:
            with open(body_path, "rb") as b:
                shutil.copyfileobj(b, f, 1 << 20)
        else:
            f.write(body)
        if size % 2:
            f.write(b"\n")

    with open(path, "wb") as f:
        f.write(b"!<arch>\n")
        member(f, "debian-binary", body=b"2.0\n")
        member(f, "control.tar.gz", body=gzip.compress(ctl.getvalue(), mtime=0))
        member(f, "data.tar.gz", body_path=dpath)
shutil.rmtree(work)
print(path)
