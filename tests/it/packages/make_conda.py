"""Writes a conda package as conda-build would (info/index.json, info/paths.json with each
file's sha256 and size, info/files), bundled by conda-package-handling: argv[1] is a JSON spec.

{"out": FOLDER, "name": "cutfix", "version": "1.0", "build": "h0_0", "build_number": 0,
 "depends": [SPEC], "constrains": [SPEC], "noarch": false,
 "format": ".conda" | ".tar.bz2",
 "files": [{"path": P, "file": PATH | "text": STR, "mode": 0o644, "symlink": TARGET,
            "in_paths": true, "bad_hash": false}],
 "extra_paths": [{...paths.json entry...}],
 "raw_entries": [{"name": N, "text": STR}]}

With "files": [] and "constrains", it is a metapackage such as conda-forge's `cuda-arch`
(one per compute capability, `constrains: ["__cuda_arch 9.0"]`).

With "raw_entries" the package is a .tar.bz2 written here with tarfile, those entries added
under the names given (`../escape`, a name twice): what no build tool writes, an attacker can.
"""
import hashlib, json, os, shutil, sys, tempfile

from conda_package_handling import api

spec = json.load(open(sys.argv[1]))
name, version, build = spec.get("name", "cutfix"), spec.get("version", "1.0"), spec.get("build", "h0_0")
prefix = tempfile.mkdtemp()
paths = []
for f in spec["files"]:
    at = os.path.join(prefix, f["path"])
    os.makedirs(os.path.dirname(at), exist_ok=True)
    if "symlink" in f:
        os.symlink(f["symlink"], at)
        entry = {"_path": f["path"], "path_type": "softlink"}
    else:
        if "file" in f:
            shutil.copyfile(f["file"], at)
        else:
            open(at, "w").write(f.get("text", ""))
        os.chmod(at, f.get("mode", 0o644))
        data = open(at, "rb").read()
        sha = hashlib.sha256(data).hexdigest()
        if f.get("bad_hash"):
            sha = ("0" if sha[0] != "0" else "1") + sha[1:]
        entry = {"_path": f["path"], "path_type": "hardlink", "sha256": sha, "size_in_bytes": len(data)}
    if f.get("in_paths", True):
        paths.append(entry)
paths += spec.get("extra_paths", [])
info = os.path.join(prefix, "info")
os.makedirs(info)
index = {"name": name, "version": version, "build": build, "build_number": spec.get("build_number", 0),
         "depends": spec.get("depends", []), "subdir": "linux-64", "arch": "x86_64", "platform": "linux",
         "license": "MIT", "timestamp": 1700000000000}
if spec.get("constrains"):
    index["constrains"] = spec["constrains"]
json.dump(index, open(os.path.join(info, "index.json"), "w"), indent=2, sort_keys=True)
json.dump({"paths": paths, "paths_version": 1}, open(os.path.join(info, "paths.json"), "w"), indent=2)
open(os.path.join(info, "files"), "w").write("".join(p["_path"] + "\n" for p in paths))
fmt = spec.get("format", ".conda")
out = os.path.join(spec["out"], f"{name}-{version}-{build}{fmt}")
if "raw_entries" in spec:
    import io, tarfile
    with tarfile.open(out, "w:bz2") as t:
        for root, dirs, files in os.walk(prefix):
            dirs.sort()
            for f in sorted(files):
                full = os.path.join(root, f)
                t.add(full, os.path.relpath(full, prefix))
        for raw in spec["raw_entries"]:
            data = raw.get("text", "").encode()
            info = tarfile.TarInfo(raw["name"])
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
else:
    api.create(prefix, None, f"{name}-{version}-{build}{fmt}", out_folder=spec["out"])
print(out)
