#!/usr/bin/env python3
"""Import cycles among sibling modules, over whole crates.

Each crate's module tree is read from its root (`mod NAME;` declarations, files `NAME.rs` or
`NAME/mod.rs`). Every path a file names in code (`crate::a::b`, `super::x`, `self::x`, and
the groups of `use` lines; comments, strings and `#[cfg(test)]` modules do not count) is an
edge from the file's module to the deepest module the path reaches. An edge between two
modules counts between their ancestors that are siblings: `crate::elf::cut` naming
`crate::inputs::scan` is the edge `elf -> inputs` among the crate's top-level modules. An
edge from a module to its own ancestor (a child using its parent's items) is not one.
Cycles among siblings are printed (with one file and line that makes each edge) and exit 1.

  python3 scripts/module-cycles.py [--edges] [--independent=A,B,...] [CRATE_ROOT ...]
  (default: src/lib.rs runtime/src/lib.rs format/src/lib.rs cubin-store/src/lib.rs)

--independent: top-level modules of the first crate none of which may import another (the
CLI's commands: each is a library module the CLI dispatches to, over shared layers).
"""
import os
import re
import sys

ROOTS = ["src/lib.rs", "runtime/src/lib.rs", "format/src/lib.rs", "cubin-store/src/lib.rs"]


def strip(text):
    """The code of `text` without comments, string and char literals (kept as blanks, so that
    line numbers stay), and without `#[cfg(test)]` modules."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            hashes = re.match(r'r(#*)"', text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            j = n if end < 0 else end + 1 + len(hashes)
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append("\n" * text.count("\n", i, j))
            i = j + 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'|'\\u\{[0-9a-fA-F]+\}'|'\\x[0-9a-fA-F]{2}'", text[i:i + 12]):
            m = re.match(r"'(\\.|[^\\'])'|'\\u\{[0-9a-fA-F]+\}'|'\\x[0-9a-fA-F]{2}'", text[i:i + 12])
            i += len(m.group(0))
        else:
            out.append(c)
            i += 1
    code = "".join(out)
    # `#[cfg(test)] mod NAME { ... }`: blanked (tests may use anything).
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{", code)
        if not m:
            break
        depth, j = 1, m.end()
        while j < len(code) and depth:
            depth += {"{": 1, "}": -1}.get(code[j], 0)
            j += 1
        code = code[:m.start()] + "\n" * code.count("\n", m.start(), j) + code[j:]
    return code


def expand(tree):
    """The paths of a `use` tree: `a::{b, c::{d, e}}` gives a::b, a::c::d, a::c::e."""
    tree = re.sub(r"\s+", "", tree)
    depth, start, parts = 0, 0, []
    m = re.match(r"^(.*?)\{(.*)\}$", tree)
    if not m:
        return [tree.split(" as ")[0]]
    prefix, inner = m.group(1), m.group(2)
    for i, ch in enumerate(inner + ","):
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(inner[start:i])
            start = i + 1
    paths = []
    for p in parts:
        if p:
            for sub in expand(p):
                paths.append(prefix + sub if sub != "self" else prefix.rstrip(":"))
    return paths


class Crate:
    def __init__(self, root):
        self.root = root
        self.files = {}  # module path (tuple) -> file
        self.load((), root)

    def load(self, module, path):
        self.files[module] = path
        code = strip(open(path).read())
        here = os.path.dirname(path)
        stem = os.path.basename(path)[:-3]
        base = here if stem in ("lib", "main", "mod") else os.path.join(here, stem)
        for name in re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", code, re.M):
            for cand in (os.path.join(base, name + ".rs"), os.path.join(base, name, "mod.rs")):
                if os.path.exists(cand):
                    self.load(module + (name,), cand)
                    break

    def deepest(self, path):
        """The deepest module `path` (a tuple from the crate root) reaches."""
        best = ()
        for i in range(1, len(path) + 1):
            if path[:i] in self.files:
                best = path[:i]
            else:
                break
        return best

    def edges(self):
        """(from module, to module, file, line) for every path a file names."""
        out = []
        for module, path in sorted(self.files.items()):
            code = strip(open(path).read())
            refs = []
            for m in re.finditer(r"\buse\s+([^;]*);", code):
                line = code.count("\n", 0, m.start()) + 1
                refs += [(p, line) for p in expand(m.group(1))]
            body = re.sub(r"\buse\s+[^;]*;", lambda m: "\n" * m.group(0).count("\n"), code)
            for m in re.finditer(r"\b((?:crate|super|self)(?:::\w+)+)", body):
                refs.append((m.group(1), code.count("\n", 0, m.start()) + 1))
            for ref, line in refs:
                parts = [p for p in ref.split("::") if p]
                if not parts:
                    continue
                if parts[0] == "crate":
                    target = tuple(parts[1:])
                elif parts[0] in ("super", "self"):
                    # `super` of a file's module is its parent; `self` the module itself.
                    at = module
                    while parts and parts[0] in ("super", "self"):
                        if parts[0] == "super":
                            at = at[:-1]
                        parts = parts[1:]
                    target = at + tuple(parts)
                else:
                    continue
                to = self.deepest(target)
                if to != module:
                    out.append((module, to, path, line))
        return out


def sibling_edge(a, b):
    """The edge between the ancestors of `a` and `b` that are siblings, or None when one is
    the other's ancestor."""
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    if k == len(a) or k == len(b):
        return None
    return a[:k], a[k], b[k]


def cycles(graph):
    """The edges of `graph` (node -> set) that lie on a cycle."""
    def reaches(x, y, seen):
        for d in graph.get(x, ()):
            if d == y or (d not in seen and (seen.add(d) or reaches(d, y, seen))):
                return True
        return False
    return [(a, b) for a in sorted(graph) for b in sorted(graph[a]) if reaches(b, a, set())]


def main(argv):
    show_edges = "--edges" in argv
    independent = set()
    for a in argv:
        if a.startswith("--independent="):
            independent = set(a.split("=", 1)[1].split(","))
    roots = [a for a in argv if not a.startswith("--")] or ROOTS
    bad = 0
    for n, root in enumerate(roots):
        crate = Crate(root)
        levels = {}  # parent -> {child: {child: (file, line)}}
        for a, b, path, line in crate.edges():
            e = sibling_edge(a, b)
            if e:
                parent, x, y = e
                levels.setdefault(parent, {}).setdefault(x, {}).setdefault(y, (path, line))
        for parent, graph in sorted(levels.items()):
            where = "::".join(("crate",) + parent)
            if show_edges:
                for x in sorted(graph):
                    print(f"{root}: {where}: {x} -> {', '.join(sorted(graph[x]))}")
            for x, y in cycles({k: set(v) for k, v in graph.items()}):
                f, l = graph[x][y]
                print(f"{root}: {where}: {x} -> {y} is part of an import cycle ({f}:{l})")
                bad += 1
            if n == 0 and parent == () and independent:
                for x in sorted(independent & set(graph)):
                    for y in sorted(independent & set(graph[x])):
                        f, l = graph[x][y]
                        print(f"{root}: command {x} imports command {y} ({f}:{l})")
                        bad += 1
    print(f"module-cycles: {bad} edges on cycles (or between commands) in {', '.join(roots)}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
