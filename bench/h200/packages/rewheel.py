"""Makes a wheel again from an installed distribution: argv[1] its .dist-info folder, argv[2]
the folder to write into. The files its RECORD lists (hash-checked as they are read), less
what pip writes at install (INSTALLER, REQUESTED, direct_url.json, bytecode), under the name
the WHEEL file's first tag gives: what the machine installed, as a wheel to prune and serve."""
import base64, hashlib, os, sys, zipfile

info, out = sys.argv[1], sys.argv[2]
site = os.path.dirname(info)
dist_ver = os.path.basename(info)[: -len(".dist-info")]
tag = next(l.split(": ", 1)[1].strip() for l in open(os.path.join(info, "WHEEL")) if l.startswith("Tag: "))
wheel = os.path.join(out, f"{dist_ver}-{tag}.whl")
skip = {"INSTALLER", "REQUESTED", "direct_url.json", "RECORD"}
record = []
with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as z:
    for line in open(os.path.join(info, "RECORD")):
        path, digest, size = line.rstrip("\n").rsplit(",", 2)
        if not digest or path.endswith(".pyc") or os.path.basename(path) in skip and path.startswith(os.path.basename(info)):
            continue
        data = open(os.path.join(site, path), "rb").read()
        got = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert digest == f"sha256={got}", f"{path}: installed file differs from its RECORD"
        info_z = zipfile.ZipInfo(path, (2026, 1, 1, 0, 0, 0))
        info_z.external_attr = (os.stat(os.path.join(site, path)).st_mode & 0o777 | 0o100000) << 16
        info_z.compress_type = zipfile.ZIP_DEFLATED
        z.writestr(info_z, data)
        record.append(f"{path},{digest},{len(data)}")
    record.append(f"{os.path.basename(info)}/RECORD,,")
    z.writestr(f"{os.path.basename(info)}/RECORD", "\n".join(record) + "\n")
print(wheel)
