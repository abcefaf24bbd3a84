#!/usr/bin/env python3
"""zstd parameters for one frame per cubin, as the store writes them: every STEP-th cubin of
DIR (what `fatpack extract` writes), from the OFFSET-th, each compressed alone single-threaded
by python-zstandard with each parameter set, the sets interleaved per cubin (so drift hits
them alike); total size, CPU seconds and decode speed per set. It chose the writer's tuning
(cubin-store/src/writer.rs, `cubin_tuning`); what the writer then writes is measured by
bench/link_time.sh.

    python3 -m venv V && V/bin/pip install zstandard
    V/bin/python bench/zstd_params.py DIR [STEP=10] [OFFSET=5] [SETS=default]

SETS: "default" (zstd's level and the tuned one, levels 5-12), "logs" (the window and
hash-log sweep at level 8), "fast" (levels 1-5, with and without the larger window).
"""
import os
import sys
import time

import zstandard as z

d = sys.argv[1]
step = int(sys.argv[2]) if len(sys.argv) > 2 else 10
offset = int(sys.argv[3]) if len(sys.argv) > 3 else 5
which = sys.argv[4] if len(sys.argv) > 4 else "default"
if which == "default":
    sets = {}
    for level in (9, 5, 6, 7, 12):
        sets[f"L{level}"] = dict(level=level)
        sets[f"L{level} w24 h19"] = dict(level=level, window_log=24, hash_log=19)
elif which == "fast":
    sets = {"L9": dict(level=9), "L9 w24 h19": dict(level=9, window_log=24, hash_log=19)}
    for level in (1, 2, 3, 4, 5):
        sets[f"L{level}"] = dict(level=level)
        sets[f"L{level} w24"] = dict(level=level, window_log=24)
    for level in (3, 4):
        sets[f"L{level} w24 h19"] = dict(level=level, window_log=24, hash_log=19)
    sets["L5 w24 h19"] = dict(level=5, window_log=24, hash_log=19)
else:
    sets = {"L9": dict(level=9), "L8": dict(level=8)}
    for w in (22, 23, 24):
        sets[f"L8 w{w}"] = dict(level=8, window_log=w)
    for h in (16, 17, 18, 19):
        sets[f"L8 w24 h{h}"] = dict(level=8, window_log=24, hash_log=h)
files = sorted(f for f in os.listdir(d) if f.endswith(".cubin"))[offset::step]
size = {k: 0 for k in sets}
cpu = {k: 0.0 for k in sets}
dec = {k: 0.0 for k in sets}
raw = 0
for f in files:
    b = open(os.path.join(d, f), "rb").read()
    raw += len(b)
    for k, s in sets.items():
        s = dict(s)
        level = s.pop("level")
        p = z.ZstdCompressionParameters.from_level(
            level, source_size=len(b), write_content_size=True, write_checksum=False, **s
        )
        c = z.ZstdCompressor(compression_params=p)
        t = time.process_time()
        out = c.compress(b)
        cpu[k] += time.process_time() - t
        size[k] += len(out)
        t = time.process_time()
        assert z.ZstdDecompressor().decompress(out) == b
        dec[k] += time.process_time() - t
print(f"{len(files)} cubins, {raw / 2**20:.1f} MiB raw (zstd {'.'.join(map(str, z.ZSTD_VERSION))})")
print(f"{'set':<12} {'MiB':>9} {'vs L9':>7} {'CPU s':>7} {'MB/s':>7} {'speed vs L9':>11} {'decode MB/s':>11}")
for k in sets:
    print(
        f"{k:<12} {size[k] / 2**20:9.2f} {size[k] / size['L9']:7.3f} {cpu[k]:7.2f} "
        f"{raw / cpu[k] / 1e6:7.1f} {cpu['L9'] / cpu[k]:10.2f}x {raw / dec[k] / 1e6:11.0f}"
    )
