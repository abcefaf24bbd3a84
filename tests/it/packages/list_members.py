"""Prints a package's content as JSON: every member's name -> sha256 of its bytes (a link:
"-> TARGET"), read with Python's own readers, for the campaign's check that a mutant prune
accepted gave the same package as the original (what no check vouches for, such as times,
modes and the containers' own bytes, is left out).

argv: PACKAGE (wheel, .conda, .tar.bz2 or deb). Needs `zstandard` for .conda.
"""
import hashlib, io, json, sys, tarfile, zipfile

path = sys.argv[1]
out = {}


def tar_members(prefix, data, mode="r:*"):
    with tarfile.open(fileobj=io.BytesIO(data), mode=mode) as t:
        for m in t.getmembers():
            name = prefix + m.name.removeprefix("./")
            if m.issym() or m.islnk():
                out[name] = "-> " + m.linkname
            elif m.isfile():
                out[name] = hashlib.sha256(t.extractfile(m).read()).hexdigest()


if path.endswith(".whl"):
    with zipfile.ZipFile(path) as z:
        for m in z.infolist():
            if not m.is_dir():
                out[m.filename] = hashlib.sha256(z.read(m)).hexdigest()
elif path.endswith(".conda"):
    import zstandard
    with zipfile.ZipFile(path) as z:
        for m in z.infolist():
            data = z.read(m)
            if m.filename.endswith(".tar.zst"):
                inner = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read()
                tar_members(m.filename.split("-")[0] + ":", inner, "r:")
            else:
                out[m.filename] = hashlib.sha256(data).hexdigest()
elif path.endswith(".tar.bz2"):
    tar_members("", open(path, "rb").read(), "r:bz2")
elif path.endswith(".deb"):
    data = open(path, "rb").read()
    assert data.startswith(b"!<arch>\n")
    at = 8
    while at + 60 <= len(data):
        head = data[at:at + 60]
        name = head[:16].decode().strip().rstrip("/")
        size = int(head[48:58].decode().strip())
        body = data[at + 60:at + 60 + size]
        if name.startswith(("control.tar", "data.tar")):
            tar_members(name.split(".")[0] + ":", body)
        else:
            out[name] = hashlib.sha256(body).hexdigest()
        at += 60 + size + size % 2
print(json.dumps(out, sort_keys=True))
