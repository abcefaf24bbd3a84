#!/usr/bin/env python3
"""Functions longer than a limit (default 150 lines, counted from `fn` to its closing
brace, comments and blank lines included) in shipped Rust code: everything under the given
folders except tests (`tests/`, `#[cfg(test)]` modules). Exit 1 if any.
    python3 scripts/long-functions.py [--limit N] DIR...
"""
import re
import sys
from pathlib import Path

FN = re.compile(r'^(\s*)(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+"C"\s+)?fn\s+(\w+)')


def functions(path):
    lines = path.read_text().splitlines()
    in_test = None  # indentation of a #[cfg(test)] module being skipped
    i = 0
    while i < len(lines):
        line = lines[i]
        if in_test is not None:
            if line.startswith(in_test + '}'):
                in_test = None
            i += 1
            continue
        if line.strip() == '#[cfg(test)]' and i + 1 < len(lines) and 'mod ' in lines[i + 1]:
            in_test = re.match(r'\s*', lines[i + 1]).group(0)
            i += 2
            continue
        m = FN.match(line)
        if m and not line.rstrip().endswith(';'):
            depth, started, j = 0, False, i
            while j < len(lines):
                code = re.sub(r'//.*', '', lines[j])
                code = re.sub(r"'(\\.|[^\\'])'", '', code)
                code = re.sub(r'"(\\.|[^"\\])*"', '""', code)
                depth += code.count('{') - code.count('}')
                started = started or '{' in code
                if started and depth <= 0:
                    break
                j += 1
            yield m.group(8), i + 1, j - i + 1
            i += 1
            continue
        i += 1


def main():
    args = sys.argv[1:]
    limit = 150
    if args[:1] == ['--limit']:
        limit, args = int(args[1]), args[2:]
    long = []
    for d in args:
        for p in sorted(Path(d).rglob('*.rs')):
            if '/tests/' in f'/{p}' or p.name == 'tests.rs':
                continue
            for name, at, n in functions(p):
                if n > limit:
                    long.append((n, f'{p}:{at}', name))
    for n, where, name in sorted(long, reverse=True):
        print(f'{n:5} {where} {name}')
    sys.exit(1 if long else 0)


if __name__ == '__main__':
    main()
