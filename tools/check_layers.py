#!/usr/bin/python3
"""The layering of src/, checked: includes against link lines, link lines against the docs.

usage: tools/check_layers.py [--root DIR]

1. Every `#include "part/file.hpp"` in src/ names a header of its own target or
   of a target the including target may use: the ones its CMakeLists.txt links
   (PUBLIC, PRIVATE or INTERFACE) and, through those, what they link PUBLIC or
   INTERFACE, as CMake passes usage requirements on. A header belongs to the
   target whose add_library() lists its .cpp (or its .cu), else to the first
   target of its folder. An include of a header-only target's plain header
   (no Kokkos in it) that carries `// layering: header only` on its line is
   allowed without the link: the zoo's shapes from kernels/geometry.hpp.
2. The "may use" column of docs/ARCHITECTURE.md's table of parts names, for each
   target, exactly the project targets its link line names (`asgd_common`, ...).
3. The uses form no cycle.

One line per problem, naming the file (and line) or the target; exit 1 on any.
"""
import argparse
import os
import re
import sys

LINK = re.compile(r"target_link_libraries\(\s*(\w+)(.*?)\)", re.S)
LIB = re.compile(r"add_library\(\s*(\w+)\s+(?:STATIC|SHARED|OBJECT|INTERFACE)?([^)]*)\)", re.S)
HEADER_ONLY = "// layering: header only"
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/([^"]+)"', re.M)


def cmake_targets(src):
    """target -> (folder, sources, {linked target: visibility})."""
    targets = {}
    for part in sorted(os.listdir(src)):
        path = os.path.join(src, part, "CMakeLists.txt")
        if not os.path.isfile(path):
            continue
        with open(path) as f:
            text = re.sub(r"#[^\n]*", "", f.read())
        for m in LIB.finditer(text):
            sources = {os.path.splitext(os.path.basename(s))[0] for s in m.group(2).split() if "." in s}
            targets.setdefault(m.group(1), (part, set(), {}))[1].update(sources)
        for m in LINK.finditer(text):
            name = m.group(1)
            if name not in targets:
                targets[name] = (part, set(), {})
            vis = "PUBLIC"
            for word in m.group(2).split():
                if word in ("PUBLIC", "PRIVATE", "INTERFACE"):
                    vis = word
                elif re.fullmatch(r"asgd_\w+", word):
                    targets[name][2].setdefault(word, vis)
    return targets


def documented(doc):
    """target -> set of targets named in its row's "may use" column."""
    rows = {}
    with open(doc) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) < 4 or not cells[1].startswith("`asgd"):
                continue
            target = cells[1].strip("`").split("`")[0]
            rows[target] = set(re.findall(r"`(asgd_\w+)`", cells[-1]))
    return rows


def header_owner(targets):
    """(folder, header stem) -> target; folder -> its first target."""
    owner, first = {}, {}
    for name, (part, sources, _) in targets.items():
        first.setdefault(part, name)
        for s in sources:
            owner[(part, s)] = name
    return owner, first


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    a = ap.parse_args()
    src = os.path.join(a.root, "src")
    doc = os.path.join(a.root, "docs/ARCHITECTURE.md")
    rows = documented(doc)
    targets = {k: v for k, v in cmake_targets(src).items() if v[1] or k in rows}
    project = set(targets)
    owner, first = header_owner(targets)
    problems = []

    def exported(t, seen=None):
        seen = seen if seen is not None else set()
        for dep, vis in targets.get(t, ("", set(), {}))[2].items():
            if dep in project and vis in ("PUBLIC", "INTERFACE") and dep not in seen:
                seen.add(dep)
                exported(dep, seen)
        return seen

    allowed = {}
    for t, (_, _, links) in targets.items():
        ok = {t}
        for dep in links:
            if dep in project:
                ok |= {dep} | exported(dep)
        allowed[t] = ok

    for t, (part, sources, _) in sorted(targets.items()):
        folder = os.path.join(src, part)
        for fname in sorted(os.listdir(folder)):
            stem, ext = os.path.splitext(fname)
            if ext not in (".hpp", ".cpp", ".cu", ".cuh", ".h"):
                continue
            if owner.get((part, stem), first.get(part)) != t:
                continue
            with open(os.path.join(folder, fname)) as f:
                text = f.read()
            for m in INCLUDE.finditer(text):
                inc_part, inc_file = m.group(1), m.group(2)
                if inc_part not in first:
                    continue
                inc_t = owner.get((inc_part, os.path.splitext(os.path.basename(inc_file))[0]), first[inc_part])
                end = text.find("\n", m.end())
                marked = HEADER_ONLY in text[m.end():end if end >= 0 else len(text)]
                if inc_t not in allowed[t] and not (marked and not targets[inc_t][1]):
                    line = text.count("\n", 0, m.start()) + 1
                    problems.append(f"src/{part}/{fname}:{line}: includes {inc_part}/{inc_file} ({inc_t}), "
                                    f"which {t} does not link")

    for t in sorted(project):
        linked = {d for d in targets[t][2] if d in project}
        if t not in rows:
            problems.append(f"docs/ARCHITECTURE.md: no row for target {t}")
        elif rows[t] != linked:
            problems.append(f"docs/ARCHITECTURE.md: {t} may use {', '.join(sorted(rows[t])) or 'nothing'} "
                            f"by its row, its link line names {', '.join(sorted(linked)) or 'nothing'}")

    state = {}

    def visit(t, path):
        state[t] = 1
        for dep in targets[t][2]:
            if dep not in project:
                continue
            if state.get(dep) == 1:
                problems.append(f"a cycle of uses: {' -> '.join(path + [dep])}")
            elif dep not in state:
                visit(dep, path + [dep])
        state[t] = 2

    for t in sorted(project):
        if t not in state:
            visit(t, [t])
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
