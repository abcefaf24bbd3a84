#!/usr/bin/env python3
"""Design experiments on one arch's cubins (not what fatpack writes: what it could write).

    python3 bench/frame_experiments.py DIR [LEVEL=19]

DIR holds `.cubin` files named `<lib>_<module>.sm_XX.cubin`, as `fatpack extract --arch`
writes them (BENCHMARKS.md used cuBLASLt 13's sm_90 cubins from the PyPI wheel). With the
zstd CLI, prints bytes against one frame per cubin for:
  - each cubin of 256 KiB or more cut into independent frames (4 parts; 256 KiB parts),
    which a first load could decode on several threads (measured at level 9);
  - solid groups of 8 and 32 MiB in module order (what `repack --release` does per family);
  - every cubin compressed alone against a prefix dictionary of sampled cubins (4 and 8 MiB,
    every len/40-th cubin that fits), plus the dictionary's own frame.
"""
import re
import subprocess
import sys
from pathlib import Path


def zlen(data: bytes, *args: str) -> int:
    out = subprocess.run(["zstd", "-q", "-c", "--no-check", *args], input=data,
                         capture_output=True, check=True).stdout
    return len(out)


def main() -> None:
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
        total, cur = 0, b""
        for d in data:
            if cur and len(cur) + len(d) > mib << 20:
                total += zlen(cur, level, "--long=27")
                cur = b""
            cur += d
        if cur:
            total += zlen(cur, level, "--long=27")
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
