#!/usr/bin/env python3
"""Checks build.sh's OUTDIR without a GPU:
  - `fatpack inspect --json` on every binary: plain ones keep their fatbins, packed ones
    carry a store whose digest matches, with the expected modules and archs;
  - ELF dynamic sections: RUNPATH $ORIGIN, DT_NEEDED present in the variant folder;
  - every suite and first_kernel starts and, with no usable driver here, fails cleanly
    (non-zero exit below 128, the CUDA error reported by the program's own checks).
    Where a GPU *is* usable, the run is skipped here (run.sh does it).

    check_build.py OUTDIR FATPACK
"""
import json
import os
import re
import struct
import subprocess
import sys

out, fatpack = sys.argv[1], sys.argv[2]
FULL = {"sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "compute_90"}
PTX80 = {"sm_80", "compute_80"}
PRUNED90 = {"sm_90", "compute_90"}
# Objects with device code in the suite executable (main.o has an empty fatbin of its own).
SUITE_OBJS = {"main.o", "a.o", "b.o", "c.o", "g.o", "h.o", "k.o", "m.o", "o.o", "f1.o", "f2.o", "dlink.o"}

passed = failed = 0


def check(ok, what, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"  ok   {what}")
    else:
        failed += 1
        print(f"  FAIL {what}" + (f": {detail}" if detail else ""))
    return ok


def inspect(path):
    p = subprocess.run([fatpack, "inspect", "--json", path], capture_output=True, text=True)
    if p.returncode != 0:
        return None, p.stderr.strip()
    try:
        return json.loads(p.stdout)[0], ""
    except (ValueError, IndexError) as e:
        return None, f"bad JSON: {e}"


def archs_of(report):
    return {e["arch"] for m in report.get("modules", []) for e in m.get("entries", [])}


def origins(report):
    # "…/obj/std/a.o#0" -> "a.o"
    return {os.path.basename(m.get("origin", "").split("#")[0]) for m in report.get("modules", [])}


def elf_dynamic(path):
    """(needed list, runpath/rpath string) from the ELF64 dynamic section."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        return None, None
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    secs = []
    for i in range(shnum):
        name, typ, flags, addr, off, size, link, info, align, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", data, shoff + i * shentsize)
        secs.append((name, typ, off, size, link))
    dyn = [s for s in secs if s[1] == 6]  # SHT_DYNAMIC
    if not dyn:
        return [], ""
    _, _, off, size, link = dyn[0]
    stroff = secs[link][2]

    def cstr(o):
        end = data.index(b"\0", stroff + o)
        return data[stroff + o:end].decode()

    needed, rp = [], ""
    for i in range(0, size, 16):
        tag, val = struct.unpack_from("<qQ", data, off + i)
        if tag == 0:
            break
        if tag == 1:
            needed.append(cstr(val))
        elif tag in (15, 29):  # DT_RPATH, DT_RUNPATH
            rp = cstr(val)
    return needed, rp


def run_nogpu(cmd, cwd, env_extra=None, want_lines=()):
    env = dict(os.environ)
    env.update(env_extra or {})
    try:
        p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120, env=env)
    except subprocess.TimeoutExpired:
        return check(False, " ".join(cmd), "timed out")
    text = p.stdout + p.stderr
    if p.returncode == 0 and re.search(r"^PASS device|check=PASS", text, re.M):
        print(f"  skip {' '.join(cmd)}: a GPU is usable here (run.sh covers it)")
        return True
    ok = 0 < p.returncode < 128
    errs = re.search(r"cudaError\w+", text)
    ok = ok and errs is not None
    for w in want_lines:
        ok = ok and re.search(w, text, re.M) is not None
    last = [l for l in text.splitlines() if l.strip()][-1:] or [""]
    return check(ok, f"{os.path.relpath(cmd[0], out)} {' '.join(cmd[1:])} fails cleanly without GPU",
                 f"rc={p.returncode} ({errs.group(0) if errs else 'no CUDA error reported'}), last line: {last[0]}"
                 if not ok else "")


status = {}
with open(os.path.join(out, "BUILD_STATUS")) as f:
    for line in f:
        parts = line.split()
        if len(parts) >= 2:
            status[parts[0]] = parts[1:]

for name, st in status.items():
    if st[0] != "OK":
        print(f"{name}: not built ({' '.join(st[1:])})")
        continue
    d = os.path.join(out, name)
    print(f"{name}:")
    is_bench = name.startswith("bench/")
    if name == "cross_lib":
        check(os.path.isfile(os.path.join(d, "cross_lib")), "cross_lib exists")
        continue
    if name.startswith("managed/"):
        path = os.path.join(d, "managed_first")
        check(os.path.isfile(path), "managed_first exists")
        if "packed" in st[1:][1] if len(st) > 2 else False:
            rep, err = inspect(path)
            check(bool(rep) and rep.get("packed", {}).get("mapped") is True, "managed_first: store mapped", err)
        continue
    packed = "packed" in st[2] if len(st) > 2 else False
    want_archs = PTX80 if st[1] == "ptx80" else PRUNED90 if st[1] == "pruned90" else FULL
    bins = ["first_kernel"] if is_bench else ["suite", "libsuite_lib.so", "libdyn.so"]
    for b in bins:
        path = os.path.join(d, b)
        if not check(os.path.isfile(path), f"{b} exists"):
            continue
        rep, err = inspect(path)
        if not check(rep is not None, f"fatpack inspect {b}", err):
            continue
        mods = rep.get("modules", [])
        if packed:
            pk = rep.get("packed") or {}
            check(bool(pk), f"{b}: packed (has a store)", "no store found")
            check(pk.get("digest_matches") is True, f"{b}: store digest matches", json.dumps(pk))
            if name == "packed_side_file":
                check(os.path.isfile(path + ".fatpack") and "side" in str(pk.get("store", "")),
                      f"{b}: store in side file {b}.fatpack", str(pk.get("store")))
            else:
                check(not os.path.exists(path + ".fatpack") and "section" in str(pk.get("store", "")),
                      f"{b}: store in the .fatpack section", str(pk.get("store")))
        else:
            check(not rep.get("packed"), f"{b}: not packed (ordinary fatbins)")
        check(archs_of(rep) == want_archs, f"{b}: archs {sorted(want_archs)}", f"got {sorted(archs_of(rep))}")
        if b == "suite":
            n = len(mods)
            check(n == len(SUITE_OBJS), f"suite: {len(SUITE_OBJS)} modules", f"got {n}")
            if packed:
                check(origins(rep) == SUITE_OBJS, "suite: module origins are the suite objects",
                      f"got {sorted(origins(rep))}")
                rel = [m for m in mods if any(e.get("relocatable") for e in m["entries"])]
                check(len(rel) == 2, "suite: two relocatable (-rdc) modules, f1.o and f2.o",
                      f"got {[m.get('origin') for m in rel]}")
        elif b.endswith(".so"):
            check(len(mods) == 1, f"{b}: one module", f"got {len(mods)}")
        elif b == "first_kernel":
            nk = rep.get("totals", {}).get("kernels", 0)
            # totals.kernels counts distinct kernels (each once, whatever the archs carrying it).
            check(nk >= 40, f"first_kernel: many kernels ({nk} distinct)")
        needed, rp = elf_dynamic(path)
        if needed is not None and not is_bench:
            check("$ORIGIN" in rp, f"{b}: RUNPATH has $ORIGIN", f"runpath {rp!r}")
            for lib in needed:
                if lib.startswith(("libsuite_lib", "libcudart")):
                    check(os.path.isfile(os.path.join(d, lib)), f"{b}: needs {lib}, present in {name}/")
        if name == "packed_shared_cudart" and needed is not None:
            check("libcudart.so.13" in needed, f"{b}: linked to the shared cudart", f"needed {needed}")
    # Runs here: no GPU, no libcuda.so.1 -> a clean CUDA error, never a crash.
    if is_bench:
        run_nogpu([os.path.join(d, "first_kernel")], d, want_lines=[r"check=FAIL"])
    else:
        exe = os.path.join(d, "suite")
        if os.path.isfile(exe):
            run_nogpu([exe], d, want_lines=[r"^FAIL device", r"^suite: 0 passed, 1 failed"])
            run_nogpu([exe, "--continue"], d, {"FATPACK_LOG": "debug"},
                      want_lines=[r"^FAIL device", r"^suite: 0 passed, \d+ failed", r"^FAIL dlclose_dyn"])

# --- with a fake libcuda.so.1 (tests/fake/fakecuda.c: device capabilities only) -------
# cudart still fails (the fake has no real driver API), but the fatpack runtime gets far
# enough to choose entries, open and check the store, and log it all.
fake = sys.argv[3] if len(sys.argv) > 3 else ""


def fake_run(what, exe, devices, env_extra=None, must=(), must_not=(r"^fatpack: error",), args=("--continue",)):
    env = dict(os.environ)
    env.update({"LD_LIBRARY_PATH": fake, "FAKE_CUDA_DEVICES": devices, "FATPACK_LOG": "info"})
    env.update(env_extra or {})
    try:
        p = subprocess.run([exe, *args], capture_output=True, text=True, timeout=120, env=env)
    except subprocess.TimeoutExpired:
        return check(False, what, "timed out")
    text = p.stdout + p.stderr
    bad = []
    if not 0 <= p.returncode < 128:
        bad.append(f"rc={p.returncode} (signal?)")
    for w in must:
        if not re.search(w, text, re.M):
            bad.append(f"missing /{w}/")
    for w in must_not:
        m = re.search(w + r".*", text, re.M)
        if m:
            bad.append(f"unexpected: {m.group(0)[:300]}")
    if bad:
        fp_lines = [l for l in text.splitlines() if l.startswith("fatpack:")][:8]
        return check(False, what, "; ".join(bad) + "\n         " + "\n         ".join(fp_lines))
    return check(True, what)


def choice(mod, dev, cap, entry):
    return rf"^fatpack: module (\S*/)?{re.escape(mod)}#0: compute capability {cap} \(device {dev}\): {re.escape(entry)}$"


def copy_variant(name, dest):
    import shutil
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(os.path.join(out, name), dest)
    return dest


tamper_py = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tamper.py")
if fake and os.path.isfile(os.path.join(fake, "libcuda.so.1")):
    import tempfile
    tmp = tempfile.mkdtemp(prefix="fatpack-check-")
    ok_ = lambda n: status.get(n, ["?"])[0] == "OK"
    print("with a fake driver (capabilities only; cudart itself still fails):")
    if ok_("packed"):
        exe = os.path.join(out, "packed", "suite")
        fake_run("packed: sm_90 device -> sm_90 (exe, libsuite_lib.so, dlink)", exe, "90",
                 must=[choice("a.o", 0, "9.0", "sm_90"), choice("d.o", 0, "9.0", "sm_90"),
                       choice("dlink.o", 0, "9.0", "sm_90"), r"registered 1 entry"])
        fake_run("packed: devices 7.5 + 8.6 -> sm_75 and sm_86, both registered", exe, "75,86",
                 must=[choice("a.o", 0, "7.5", "sm_75"), choice("a.o", 1, "8.6", "sm_86"), r"a\.o#0: registered 2 entries"])
        fake_run("packed: 8.7 device -> sm_86 (highest lower minor)", exe, "87", must=[choice("a.o", 0, "8.7", "sm_86")])
        fake_run("packed: 8.9 device -> sm_89", exe, "89", must=[choice("a.o", 0, "8.9", "sm_89")])
        fake_run("packed: 10.0 device -> compute_90 PTX; dlink via prelinked JIT", exe, "100",
                 must=[choice("a.o", 0, "10.0", "compute_90"), choice("dlink.o", 0, "10.0", "prelinked JIT inputs")])
        fake_run("packed: 7.0 device -> clear error, no crash", exe, "70",
                 must=[r"^fatpack: error: module \S*a\.o#0\S* has no device code for compute capability 7\.0 \(device 0\)"],
                 must_not=())
        fake_run("packed: FATPACK_ARCH=compute_90 -> compute_90", exe, "90", {"FATPACK_ARCH": "compute_90"},
                 must=[choice("a.o", 0, "9.0", "compute_90")])
        fake_run("packed: FATPACK_ARCH=sm_80 on 9.0 -> warning, cudart refuses", exe, "90", {"FATPACK_ARCH": "sm_80"},
                 must=[choice("a.o", 0, "9.0", "sm_80"), r"^fatpack: warning: .*FATPACK_ARCH=sm_80 does not run on compute capability 9\.0 \(device 0\)"])
        fake_run("packed: FATPACK_ARCH=sm_banana -> clear error", exe, "90", {"FATPACK_ARCH": "sm_banana"},
                 must=[r"^fatpack: error: FATPACK_ARCH=\"sm_banana\" is not an arch name"], must_not=())
        fake_run("packed: FATPACK_EAGER=1 loads at registration", exe, "90", {"FATPACK_EAGER": "1"},
                 must=[choice("main.o", 0, "9.0", "sm_90"), choice("o.o", 0, "9.0", "sm_90")])
        for mode, margs, want in [("header", ["header"], r"^fatpack: error: .*(damaged|digest)"),
                                  ("blob", ["blob", "a.o#", "90"], r"^fatpack: error: .*a\.o#0.*(digest|corrupt)")]:
            d = copy_variant("packed", os.path.join(tmp, "tamper_" + mode))
            subprocess.run([sys.executable, tamper_py, "flip", os.path.join(d, "suite"), *margs],
                           check=True, capture_output=True)
            fake_run(f"packed: tampered store ({mode}) -> clear error, no crash", os.path.join(d, "suite"), "90",
                     must=[want], must_not=())
    if ok_("ptx_only"):
        fake_run("ptx_only: sm_90 device -> compute_80; dlink via prelinked compute_80", os.path.join(out, "ptx_only", "suite"), "90",
                 must=[choice("a.o", 0, "9.0", "compute_80"), choice("d.o", 0, "9.0", "compute_80"),
                       choice("dlink.o", 0, "9.0", "prelinked JIT inputs"),
                       r"^fatpack: module \S*dlink\.o#0: prelinked \S*f1\.o#0: compute_80 for compute capability 9\.0 \(device 0\)$"])
        fake_run("ptx_only: 8.6 device -> sm_80", os.path.join(out, "ptx_only", "suite"), "86",
                 must=[choice("a.o", 0, "8.6", "sm_80"), choice("dlink.o", 0, "8.6", "sm_80")])
    for v in ("packed_shared_cudart", "packed_stripped", "packed_side_file"):
        if ok_(v):
            fake_run(f"{v}: sm_90 device -> sm_90", os.path.join(out, v, "suite"), "90",
                     must=[choice("a.o", 0, "9.0", "sm_90"), choice("d.o", 0, "9.0", "sm_90")])
    if ok_("packed_side_file"):
        d = copy_variant("packed_side_file", os.path.join(tmp, "noside"))
        os.remove(os.path.join(d, "suite.fatpack"))
        fake_run("packed_side_file: missing suite.fatpack -> clear error", os.path.join(d, "suite"), "90",
                 must=[r"^fatpack: error: .*no device code store.*suite\.fatpack"], must_not=())
        d = copy_variant("packed_side_file", os.path.join(tmp, "foreign"))
        import shutil
        shutil.copy(os.path.join(d, "libdyn.so.fatpack"), os.path.join(d, "suite.fatpack"))
        fake_run("packed_side_file: another binary's store -> clear error", os.path.join(d, "suite"), "90",
                 must=[r"^fatpack: error: .*does not belong to this binary"], must_not=())
    if ok_("bench/packed"):
        fake_run("bench/packed: FATPACK_EAGER=1 -> sm_90 for every heavy module", os.path.join(out, "bench", "packed", "first_kernel"),
                 "90", {"FATPACK_EAGER": "1"}, must=[choice("heavy_00.o", 0, "9.0", "sm_90"), choice("heavy_07.o", 0, "9.0", "sm_90")],
                 args=())
    import shutil
    shutil.rmtree(tmp, ignore_errors=True)
else:
    print("(no fake libcuda.so.1 given: runtime selection not checked here)")

print(f"check_build: {passed} ok, {failed} failed")
sys.exit(1 if failed else 0)
