"""Solves argv[2] (match specs joined by `;`; the first names the package whose build is
printed) from the local channel argv[1] with py-rattler, on a machine whose `__cuda_arch`
(CEP 46: the lowest compute capability of its GPUs) is argv[3] (`-` for a machine without
the virtual package; `detect` for what py-rattler itself detects, which follows
`CONDA_OVERRIDE_CUDA_ARCH` and `CONDA_OVERRIDE_CUDA` as conda does). With argv[4], installs the solution into that prefix (rattler checks
each file as it links)."""
import asyncio, os, pathlib, sys

import rattler
from rattler.index import index_fs

channel, spec, arch = sys.argv[1], sys.argv[2], sys.argv[3]

def virtual(name, version):
    return rattler.GenericVirtualPackage(
        rattler.PackageName(name), rattler.Version(version), rattler.BuildString("0"))

machine = [virtual("__unix", "0"), virtual("__linux", "6.1")]
if arch == "detect":
    machine = rattler.VirtualPackage.detect(rattler.VirtualPackageOverrides.from_env())
elif arch != "-":
    machine += [virtual("__cuda", "13.0"), virtual("__cuda_arch", arch)]

async def main():
    await index_fs(pathlib.Path(channel), force=True)
    records = await rattler.solve(
        [rattler.Channel(pathlib.Path(channel).resolve().as_uri())], spec.split(";"),
        platforms=["linux-64", "noarch"], virtual_packages=machine)
    rec = next(r for r in records if r.name.normalized == spec.split(";")[0].split()[0])
    print(rec.build)
    if len(sys.argv) > 4:
        await rattler.install(records, target_prefix=sys.argv[4], show_progress=False,
                              cache_dir=pathlib.Path(sys.argv[4] + "-cache"))

asyncio.run(main())
# py-rattler 0.28's runtime threads can abort the interpreter's own teardown
# (PyGILState_Release: "must be current when releasing", seen here once in five runs): the
# work is done and printed, so leave without it.
sys.stdout.flush()
os._exit(0)
