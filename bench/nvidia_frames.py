"""NVIDIA's zstd frames against the link's own, entry by entry: what a store keeping the smaller
of the two would weigh, and what each level costs per core.

    fatpack inspect --json LIB.so > LIB.json && fatpack extract -o DIR LIB.so
    [STEP=k] python bench/nvidia_frames.py LIB.json DIR 9,15,19     (python-zstandard needed)

Every zstd-compressed entry of the library's `.nv_fatbin` (NVIDIA's frame size from the JSON)
is matched to its extracted file by arch and raw size, then compressed alone at each level
with the writer's parameters for cubins (levels 1-12: 2^24 window, 2^19 hash rows; above:
zstd's own), single-threaded; STEP=k takes every k-th entry. A model: the link's bytes are
measured by bench/store_shipped.sh (`link-level<N>`)."""
import json
import os
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import zstandard as zs


def params(level, size):
    if level <= 12:
        return zs.ZstdCompressionParameters.from_level(level, source_size=size, window_log=24, hash_log=19)
    return zs.ZstdCompressionParameters.from_level(level, source_size=size)


def work(job):
    path, nvidia, levels = job
    raw = open(path, "rb").read()
    out = [nvidia, len(raw)]
    for level in levels:
        t = time.process_time()
        n = len(zs.ZstdCompressor(compression_params=params(level, len(raw))).compress(raw))
        out.append((n, time.process_time() - t))
    return out


def main():
    report, folder = json.load(open(sys.argv[1]))[0], sys.argv[2]
    levels = [int(x) for x in sys.argv[3].split(",")]
    files = {}
    for f in sorted(os.listdir(folder)):
        m = re.search(r"\.((?:sm|compute)_\w+)\.(cubin|ptx)$", f)
        p = os.path.join(folder, f)
        if m:
            files.setdefault((m.group(1), os.path.getsize(p)), []).append(p)
    jobs = []
    for m in report["modules"]:
        if m["section"] != ".nv_fatbin":
            continue
        for e in m["entries"]:
            same = files.get((e["arch"], e["raw_size"]))
            if e["compression"] == "zstd" and same:
                jobs.append((same.pop(0), e["stored_size"], levels))
    jobs = jobs[:: int(os.environ.get("STEP", "1"))]
    with ProcessPoolExecutor(os.cpu_count()) as ex:
        rows = list(ex.map(work, jobs, chunksize=8))
    nvidia, raw = sum(r[0] for r in rows), sum(r[1] for r in rows)
    print(f"{len(rows)} zstd entries of .nv_fatbin, {raw / 2**20:.1f} MiB raw, NVIDIA's frames {nvidia / 2**20:.2f} MiB")
    for i, level in enumerate(levels):
        own = sum(r[2 + i][0] for r in rows)
        best = sum(min(r[0], r[2 + i][0]) for r in rows)
        won = sum(1 for r in rows if r[2 + i][0] < r[0])
        cpu = sum(r[2 + i][1] for r in rows)
        print(f"level {level}: all compressed again {own / 2**20:.2f} MiB ({own / nvidia:.3f} of NVIDIA's); "
              f"the smaller of the two {best / 2**20:.2f} MiB ({best / nvidia:.3f}), ours for {won} entries; "
              f"{raw / 2**20 / cpu:.1f} MiB/s per core")


if __name__ == "__main__":
    main()
