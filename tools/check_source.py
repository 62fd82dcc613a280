#!/usr/bin/env python3
"""Keeps Kiln's sources in the shape specs/extending.md describes; run by `make test`.

- No source file over 500 lines (Swift, C, headers and .inc tables under Sources/ and Tests/;
  generated protobuf code aside).
- No Swift function, initializer, accessor or closure-valued property over 120 lines. The op
  registry's schema tables (`[OpSchema]` properties: one row per op with its inference rule)
  are data, not control flow, and are exempt.
- No list of three or more string literals written again in another file (op names, modes,
  attribute names, feature names): a second copy is a second place to update. Schema input
  lists (`op("name", [inputs…]` rows) name each op's own inputs and do not count.

Prints every violation with its place and exits 1 when there is any.
"""
import collections
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_FILE = 500
MAX_FUNCTION = 120

DECLARATION = re.compile(
    r"^\s*(?:@[\w()., ]+\s+)*(?:(?:public|private|fileprivate|internal|package|static|class|mutating|nonmutating|"
    r"override|final|nonisolated|convenience|required|lazy)\s+)*(func|init|subscript|var|let)\b")


def sources(*tops):
    for top in tops:
        for directory, _, files in os.walk(os.path.join(ROOT, top)):
            for name in sorted(files):
                if name.endswith((".swift", ".c", ".h", ".inc")) and ".pb-c." not in name:
                    yield os.path.join(directory, name)


def strip_strings(line):
    """The line without string literals and // comments (so braces inside them do not count)."""
    line = re.sub(r'"(?:\\.|[^"\\])*"', '""', line)
    return line.split("//", 1)[0]


def long_functions(path, lines):
    """(first line, length, declaration) of each Swift declaration whose body runs over the limit."""
    found = []
    i = 0
    while i < len(lines):
        match = DECLARATION.match(lines[i])
        if not match:
            i += 1
            continue
        # The body opens on the declaration's line or within the next few (wrapped parameters).
        depth, opened, j = 0, False, i
        while j < len(lines) and j <= i + 8 or (opened and j < len(lines)):
            text = strip_strings(lines[j])
            if match.group(1) in ("var", "let") and not opened and "{" not in text:
                break  # a stored property
            for ch in text:
                if ch == "{":
                    depth += 1
                    opened = True
                elif ch == "}":
                    depth -= 1
            if opened and depth <= 0:
                break
            j += 1
        if opened:
            length = j - i + 1
            declaration = lines[i].strip()
            if length > MAX_FUNCTION and "[OpSchema]" not in declaration:
                found.append((i + 1, length, declaration[:90]))
            i = j + 1
        else:
            i += 1
    return found


def literal_lists(path, lines):
    """Each literal list of three or more strings on a line: (set, line number)."""
    for n, line in enumerate(lines, 1):
        code = line.split("//", 1)[0]
        if re.search(r'\bop\("\w+"', code):
            continue
        for match in re.finditer(r'((?:"[\w.]+",\s*){2,}"[\w.]+")', code):
            items = frozenset(re.findall(r'"([\w.]+)"', match.group(1)))
            if len(items) >= 3:
                yield items, n


def main():
    problems = []
    lists = collections.defaultdict(set)
    for path in sources("Sources", "Tests"):
        relative = os.path.relpath(path, ROOT)
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().split("\n")
        if len(lines) - 1 > MAX_FILE:
            problems.append(f"{relative}: {len(lines) - 1} lines (at most {MAX_FILE}): split it by what its parts do")
        if path.endswith(".swift"):
            for line, length, declaration in long_functions(path, lines):
                problems.append(f"{relative}:{line}: {length} lines (at most {MAX_FUNCTION}): {declaration}")
            if relative.startswith("Sources/"):
                for items, line in literal_lists(path, lines):
                    lists[items].add((relative, line))
    for items, places in sorted(lists.items(), key=lambda kv: sorted(kv[1])):
        files = {p for p, _ in places}
        if len(files) > 1:
            where = ", ".join(f"{p}:{n}" for p, n in sorted(places))
            problems.append(f"the list {sorted(items)} is written in {len(files)} files ({where}): declare it once")
    for p in problems:
        print(p)
    if problems:
        print(f"check_source: {len(problems)} problem(s)")
        return 1
    print("check_source: files, functions and literal lists are within bounds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
