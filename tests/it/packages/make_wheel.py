"""Writes a wheel as a build backend would, or as an attacker would: argv[1] is a JSON spec.

{"wheel": PATH, "dist": "cutfix", "version": "1.0+cu130", "tag": "py3-none-linux_x86_64",
 "members": [{"name": N, "file": PATH | "text": STR | "zeros": BYTES,
              "mode": 0o644, "symlink": TARGET, "in_record": true, "bad_hash": false}],
 "extra_record": [LINE, ...], "no_record": false}

METADATA, WHEEL and RECORD are added; RECORD lists each member with its sha256 unless the
member says otherwise. Members are streamed (a "zeros" member of a GiB never sits in memory).
"""
import base64, hashlib, json, sys, zipfile

spec = json.load(open(sys.argv[1]))
dist, version = spec.get("dist", "cutfix"), spec.get("version", "1.0+cu130")
info_dir = f"{dist}-{version}.dist-info"
members = list(spec["members"]) + [
    {"name": f"{info_dir}/METADATA", "text": f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"},
    {"name": f"{info_dir}/WHEEL",
     "text": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {spec.get('tag', 'py3-none-linux_x86_64')}\n"},
]

def chunks(m):
    if "file" in m:
        with open(m["file"], "rb") as f:
            while block := f.read(1 << 20):
                yield block
    elif "zeros" in m:
        left = m["zeros"]
        while left:
            n = min(left, 1 << 20)
            yield bytes(n)
            left -= n
    elif "symlink" in m:
        yield m["symlink"].encode()
    else:
        yield m.get("text", "").encode()

record = []
with zipfile.ZipFile(spec["wheel"], "w", zipfile.ZIP_DEFLATED, allowZip64=True) as z:
    for m in members:
        info = zipfile.ZipInfo(m["name"], (2024, 1, 1, 0, 0, 0))
        kind = 0o120000 if "symlink" in m else 0o100000
        info.external_attr = (kind | m.get("mode", 0o644)) << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        h, size = hashlib.sha256(), 0
        with z.open(info, "w", force_zip64=True) as out:
            for block in chunks(m):
                h.update(block)
                size += len(block)
                out.write(block)
        if m.get("in_record", True):
            digest = base64.urlsafe_b64encode(h.digest()).rstrip(b"=").decode()
            if m.get("bad_hash"):
                digest = "A" + digest[1:] if digest[0] != "A" else "B" + digest[1:]
            record.append(f"{m['name']},sha256={digest},{size}")
    record += spec.get("extra_record", [])
    if not spec.get("no_record"):
        record.append(f"{info_dir}/RECORD,,")
        z.writestr(f"{info_dir}/RECORD", "\n".join(record) + "\n")
