#!/usr/bin/env python3
"""Store-format experiments: how much smaller per-entry stores get with references between
entries, measured with the zstd CLI on entries `fatpack extract` wrote (bench/wheels.sh
leaves them in <work>/extract-<lib>/, named <module path>_<module index>.<arch>.{cubin,ptx}).

  python3 bench/store_experiments.py refs DIR LEVEL
      each entry alone, with the previous entry of its module (same kind) as zstd prefix
      (--patch-from), with the previous module's entry of the same arch, and the best of
      the three: MiB each.
  python3 bench/store_experiments.py dict DIR LEVEL MIB
      per arch, a raw-content prefix of up to MIB MiB sampled evenly from that arch's
      entries (stored once, zstd -19), every entry compressed against it.
  python3 bench/store_experiments.py groups DIR LEVEL MIB[,MIB...]
      per arch (what one `fatpack split` pack holds), the distinct entries in module order
      cut into groups of at most MIB MiB, each group one zstd frame (--long=27): MiB in all,
      and the mean bytes a module load would decode if decoding stops at its entry.
  python3 bench/store_experiments.py solid DIR LEVEL MIB[,MIB...]
      frames spanning modules and archs (what a release store could hold; one `fatpack split`
      pack could no longer be cut out of it): the distinct entries in module order, every
      arch of a module together, cut into chunks of at most MIB MiB, each one zstd frame
      (--long=27, two chunks at a time); MIB 0 is one frame over everything (--long=30 -T2).
      MiB in all, and the mean bytes a module load would decode (its chunk up to its entry).
  python3 bench/store_experiments.py frames DIR LEVEL
      25 cubins over 1 MiB (a fixed random sample), each cut into independent frames of
      128/256/512/1024 KiB (what decoding one entry on several threads would need): size
      relative to one frame per entry.
"""
import random
import hashlib
import collections
import os
import re
import subprocess
import sys

NAME = re.compile(r".*_(\d+)\.(sm|compute)_(\d+)([af]?)\.(cubin|ptx)$")


def entries(d):
    out = []
    for f in sorted(os.listdir(d)):
        m = NAME.match(f)
        if m:
            out.append((int(m.group(1)), m.group(2), int(m.group(3)), m.group(4), os.path.join(d, f)))
    out.sort()
    return out


def zsize(path, level, ref=None):
    cmd = ["zstd", f"-{level}", "-q", "-c", "--long=27"]
    if ref:
        cmd.append(f"--patch-from={ref}")
    cmd.append(path)
    return len(subprocess.run(cmd, capture_output=True, check=True).stdout)


def refs(d, level):
    prev_in_module, prev_same_arch = {}, {}
    tot = collections.Counter()
    for mod, kind, arch, var, p in entries(d):
        alone = zsize(p, level)
        r1, r2 = prev_in_module.get((mod, kind)), prev_same_arch.get((kind, arch, var))
        s1 = zsize(p, level, r1) if r1 else alone
        s2 = zsize(p, level, r2) if r2 else alone
        tot["alone"] += alone
        tot["in_module"] += min(alone, s1)
        tot["same_arch"] += min(alone, s2)
        tot["best"] += min(alone, s1, s2)
        prev_in_module[(mod, kind)] = p
        prev_same_arch[(kind, arch, var)] = p
    print(os.path.basename(d), "level", level, {k: round(v / 2**20, 2) for k, v in tot.items()}, "MiB")


def dictionaries(d, level, mib):
    limit = mib << 20
    by_arch = collections.defaultdict(list)
    for mod, kind, arch, var, p in entries(d):
        by_arch[(kind, arch, var)].append(p)
    total = dicts = 0
    scratch = os.path.join(os.environ.get("TMPDIR", "/tmp"), "fatpack-dict.bin")
    for paths in by_arch.values():
        size = sum(os.path.getsize(p) for p in paths)
        if size < limit // 2:
            total += sum(zsize(p, level) for p in paths)
            continue
        step = max(1, size // limit)
        sample, used = [], 0
        for p in paths[::step]:
            if used + os.path.getsize(p) <= limit:
                sample.append(p)
                used += os.path.getsize(p)
        with open(scratch, "wb") as o:
            for p in sample:
                o.write(open(p, "rb").read())
        dicts += zsize(scratch, 19)
        total += sum(zsize(p, level, scratch) for p in paths)
    print(os.path.basename(d), "level", level, f"dict {mib} MiB:",
          f"entries+dicts {(total + dicts) / 2**20:.2f} MiB (dicts {dicts / 2**20:.2f})")


def groups(d, level, mibs):
    by_arch, seen = collections.defaultdict(list), set()
    for mod, kind, arch, var, p in entries(d):
        h = hashlib.blake2b(open(p, "rb").read(), digest_size=16).digest()
        if h not in seen:  # the store keeps one copy of identical entries
            seen.add(h)
            by_arch[(kind, arch, var)].append(p)
    scratch = os.path.join(os.environ.get("TMPDIR", "/tmp"), "fatpack-group.bin")
    for mib in mibs:
        limit = mib << 20
        total = decoded = loads = 0
        for paths in by_arch.values():
            group, used = [], 0
            for p in paths + [None]:
                n = os.path.getsize(p) if p else 0
                if group and (p is None or used + n > limit):
                    with open(scratch, "wb") as o:
                        at = 0
                        for q in group:
                            o.write(open(q, "rb").read())
                            at += os.path.getsize(q)
                            decoded += at
                            loads += 1
                    total += zsize(scratch, level)
                    group, used = [], 0
                if p:
                    group.append(p)
                    used += n
        print(os.path.basename(d), "level", level, f"groups of {mib} MiB: {total / 2**20:.2f} MiB,",
              f"mean decoded per load {decoded / max(loads, 1) / 2**20:.2f} MiB", flush=True)


def solid(d, level, mibs):
    from concurrent.futures import ThreadPoolExecutor
    paths, seen = [], set()
    for mod, kind, arch, var, p in entries(d):
        h = hashlib.blake2b(open(p, "rb").read(), digest_size=16).digest()
        if h not in seen:
            seen.add(h)
            paths.append(p)
    scratch = os.path.join(os.environ.get("TMPDIR", "/tmp"), "fatpack-solid")
    os.makedirs(scratch, exist_ok=True)
    for mib in mibs:
        limit = (mib << 20) or (1 << 62)
        chunks, cur, used = [], [], 0
        for p in paths:
            n = os.path.getsize(p)
            if cur and used + n > limit:
                chunks.append(cur)
                cur, used = [], 0
            cur.append(p)
            used += n
        chunks.append(cur)
        decoded = 0
        for c in chunks:
            at = 0
            for q in c:
                at += os.path.getsize(q)
                decoded += at

        def one(i):
            f = os.path.join(scratch, f"c{i}")
            with open(f, "wb") as o:
                for q in chunks[i]:
                    o.write(open(q, "rb").read())
            cmd = ["zstd", f"-{level}", "-q", "-c"] + (["--long=27", "-T1"] if mib else ["--long=30", "-T2"])
            n = len(subprocess.run(cmd + [f], capture_output=True, check=True).stdout)
            os.remove(f)
            return n

        with ThreadPoolExecutor(2 if mib else 1) as ex:
            total = sum(ex.map(one, range(len(chunks))))
        print(os.path.basename(d), "level", level, f"solid chunks of {mib or 'all'} MiB ({len(chunks)}):",
              f"{total / 2**20:.2f} MiB, mean decoded per load {decoded / len(paths) / 2**20:.2f} MiB", flush=True)


def frames(d, level):
    big = [p for (_, kind, _, _, p) in entries(d) if kind == "sm" and os.path.getsize(p) > 1 << 20]
    random.seed(1)
    sample = random.sample(big, min(25, len(big)))

    def z(b):
        return len(subprocess.run(["zstd", f"-{level}", "-q", "-c"], input=b, capture_output=True, check=True).stdout)

    whole, cut = 0, collections.Counter()
    for p in sample:
        b = open(p, "rb").read()
        whole += z(b)
        for k in (128, 256, 512, 1024):
            cut[k] += sum(z(b[i:i + (k << 10)]) for i in range(0, len(b), k << 10))
    print(os.path.basename(d), f"{len(sample)} of {len(big)} cubins over 1 MiB, level {level}:",
          ", ".join(f"{k} KiB frames {cut[k] / whole:.3f}x" for k in sorted(cut)))


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "refs":
        refs(sys.argv[2], sys.argv[3])
    elif mode == "dict":
        dictionaries(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    elif mode == "frames":
        frames(sys.argv[2], sys.argv[3])
    elif mode == "solid":
        solid(sys.argv[2], sys.argv[3], [int(m) for m in sys.argv[4].split(",")])
    elif mode == "groups":
        groups(sys.argv[2], sys.argv[3], [int(m) for m in sys.argv[4].split(",")])
    else:
        sys.exit(__doc__)
