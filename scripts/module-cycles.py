#!/usr/bin/env python3
"""Import cycles among the modules of one folder (default src/link): a module names another
through `super::NAME` in code (comments and doc links do not count). Exits 1 on a cycle."""
import glob
import os
import re
import sys

folder = sys.argv[1] if len(sys.argv) > 1 else "src/link"
graph = {}
for path in glob.glob(f"{folder}/*.rs"):
    name = os.path.basename(path)[:-3]
    code = "\n".join(
        l.split("//")[0] for l in open(path) if not l.lstrip().startswith("//")
    )
    deps = set(re.findall(r"super::([a-z_]+)", code))
    for group in re.findall(r"use super::\{([^}]*)\}", code):
        deps |= set(re.findall(r"\b([a-z_]+)\b", group))
    graph[name] = {d for d in deps if d != name and os.path.exists(f"{folder}/{d}.rs")}


def reaches(a, b, seen):
    for d in graph.get(a, ()):
        if d == b or (d not in seen and (seen.add(d) or reaches(d, b, seen))):
            return True
    return False


cycles = [(a, b) for a in sorted(graph) for b in sorted(graph[a]) if reaches(b, a, set())]
for a, b in cycles:
    print(f"{folder}: {a} -> {b} is part of an import cycle")
sys.exit(1 if cycles else 0)
