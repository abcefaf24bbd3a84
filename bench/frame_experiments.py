#!/usr/bin/env python3
"""Design experiments on one arch's cubins (not what fatpack writes: what it could write).

    python3 bench/frame_experiments.py DIR [LEVEL=19]
    python3 bench/frame_experiments.py --family DIR [LEVEL=19] [--no-solid]

DIR holds `.cubin` files named `<lib>_<module>.sm_XX.cubin`, as `fatpack extract --arch`
writes them (BENCHMARKS.md used cuBLASLt 13's sm_90 cubins from the PyPI wheel). With the
zstd CLI, prints bytes against one frame per cubin for:
  - each cubin of 256 KiB or more cut into independent frames (4 parts; 256 KiB parts),
    which a first load could decode on several threads (measured at level 9);
  - solid groups of 8 and 32 MiB in module order (what `repack --release` does per family);
  - every cubin compressed alone against a prefix dictionary of sampled cubins (4 and 8 MiB,
    every len/40-th cubin that fits), plus the dictionary's own frame.
With --family, DIR holds several archs of one family (`--arch sm_80,sm_86,sm_89`): one frame
per cubin; solid groups of 8 and 32 MiB in module order, a module's archs side by side (what
`repack --release` does); and each cubin against an 8 MiB sampled dictionary followed by the
same module's cubin of the previous arch (a delta), plus the dictionary's frame.
"""
import re
import subprocess
import sys
import tempfile
from multiprocessing import Pool
from pathlib import Path


def zlen(data: bytes, *args: str) -> int:
    out = subprocess.run(["zstd", "-q", "-c", "--no-check", *args], input=data,
                         capture_output=True, check=True).stdout
    return len(out)


def module_arch(p: Path):
    m = re.search(r"_(\d+)\.sm_(\d+)\w*\.cubin$", p.name)
    return int(m.group(1)), int(m.group(2))


def solid(data, mib, level):
    total, cur = 0, b""
    for d in data:
        if cur and len(cur) + len(d) > mib << 20:
            total += zlen(cur, level, "--long=27")
            cur = b""
        cur += d
    if cur:
        total += zlen(cur, level, "--long=27")
    return total


def against(job):
    """The frame of `data` against the prefix `dic` (+ `base`), and whether `base` was used:
    a prefix over zstd's dictionary limit (32 MiB) falls back to `dic` alone."""
    data, dic, base, level = job
    for prefix, used in ((dic + base, bool(base)), (dic, False)):
        with tempfile.NamedTemporaryFile() as f:
            f.write(prefix)
            f.flush()
            try:
                return zlen(data, level, "-D", f.name, "--long=27"), used
            except subprocess.CalledProcessError:
                continue
    return zlen(data, level), False


def family(folder: Path, level: str) -> None:
    files = sorted(folder.glob("*.cubin"), key=module_arch)
    data = [f.read_bytes() for f in files]
    keys = [module_arch(f) for f in files]
    print(f"{len(data)} cubins of archs {sorted(set(a for _, a in keys))}, "
          f"{sum(map(len, data)) / 2**20:.1f} MiB raw, level {level}")
    with Pool() as pool:
        per = sum(pool.starmap(zlen, [(d, level) for d in data]))
        print(f"one frame per cubin: {per / 2**20:.2f} MiB = 1.000")
        if "--no-solid" not in sys.argv:
            runs = pool.starmap(solid, [(data, 8, level), (data, 32, level)])
            for mib, total in zip((8, 32), runs):
                print(f"solid groups of {mib} MiB, archs of a module side by side: {total / per:.3f}")
        step = max(1, len(data) // 40)
        dic = b""
        for d in data[::step]:
            if len(dic) + len(d) <= 8 << 20:
                dic += d
        jobs = []
        for k, d in enumerate(data):
            same = k > 0 and keys[k - 1][0] == keys[k][0]
            jobs.append((d, dic, data[k - 1] if same else b"", level))
        got = pool.map(against, jobs, chunksize=4)
        blobs = sum(n for n, _ in got)
        deltas = sum(1 for _, used in got if used)
        own = zlen(dic, level, "--long=27")
        print(f"against a {len(dic) / 2**20:.1f} MiB dictionary and the previous arch "
              f"({deltas} of {len(got)} cubins as deltas): blobs {blobs / per:.3f}, with the "
              f"dictionary's frame {(blobs + own) / per:.3f}")


def main() -> None:
    if sys.argv[1] == "--family":
        args = [a for a in sys.argv[2:] if a != "--no-solid"]
        family(Path(args[0]), f"-{args[1] if len(args) > 1 else 19}")
        return
    folder = Path(sys.argv[1])
    level = f"-{sys.argv[2] if len(sys.argv) > 2 else 19}"
    files = sorted(folder.glob("*.cubin"),
                   key=lambda p: int(re.search(r"_(\d+)\.sm_\d+\w*\.cubin$", p.name).group(1)))
    data = [f.read_bytes() for f in files]
    print(f"{len(data)} cubins, {sum(map(len, data)) / 2**20:.1f} MiB raw, level {level}")

    big = [d for d in data if len(d) >= 256 << 10]
    whole = sum(zlen(d, "-9") for d in big)
    quarters = sum(zlen(d[i:i + (len(d) + 3) // 4], "-9")
                   for d in big for i in range(0, len(d), (len(d) + 3) // 4))
    chunks = sum(zlen(d[i:i + (256 << 10)], "-9") for d in big for i in range(0, len(d), 256 << 10))
    print(f"independent frames, {len(big)} cubins >= 256 KiB, level 9: one frame {whole}, "
          f"4 parts {quarters / whole:.3f}x, 256 KiB parts {chunks / whole:.3f}x")

    per = sum(zlen(d, level) for d in data)
    print(f"one frame per cubin: {per / 2**20:.2f} MiB = 1.000")
    for mib in (8, 32):
        total = solid(data, mib, level)
        print(f"solid groups of {mib} MiB: {total / 2**20:.2f} MiB = {total / per:.3f}")
    step = max(1, len(data) // 40)
    for mib in (4, 8):
        dic = b""
        for d in data[::step]:
            if len(dic) + len(d) <= mib << 20:
                dic += d
        path = folder.parent / f"frame_experiments_dict_{mib}.bin"
        path.write_bytes(dic)
        blobs = sum(zlen(d, level, "-D", str(path), "--long=27") for d in data)
        own = zlen(dic, level, "--long=27")
        path.unlink()
        print(f"against a {len(dic) / 2**20:.1f} MiB prefix dictionary: blobs {blobs / per:.3f}, "
              f"with the dictionary's frame {(blobs + own) / per:.3f}")


if __name__ == "__main__":
    main()
