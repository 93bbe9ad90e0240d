#!/usr/bin/env python3
"""Checks the manual: every relative link in README.md, docs/ and the other
pages names a file that exists (and, with #anchor, a heading of that page),
the README stays short, and no page speaks of how the software was made
(work sessions, issue numbers, files outside the repository).

  tools/check_docs.py [--root DIR]     exit 0: all good; 1: one line per problem

With --run BINDIR it runs, instead, every command block that a page marks as
runnable (a line `<!-- runnable -->` right before the opening fence): the
block's lines as one bash script (`set -e`), from the repository's root, with
BINDIR first on PATH and one BLAS thread, each block given 300 s. Exit 1 names
the page and line of each block that failed, with the end of its output.
"""
import argparse
import functools
import os
import re
import subprocess
import sys

README_MAX_LINES = 200
# Words that describe the making of the software, not the software.
HISTORY = [
    (re.compile(r"\bsession [0-9]+", re.I), "a work session"),
    (re.compile(r"\bissue #?[0-9]+", re.I), "an issue number"),
    (re.compile(r"\.\./shared\b|\bDESIGN\.md\b|\bSTYLE\.md\b"), "a file outside the repository"),
    (re.compile(r"\bother engineers\b|\bbefore the (fix|redesign)\b|\bsince fixed\b", re.I),
     "the history of the code"),
]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to '-'."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


@functools.lru_cache(maxsize=None)
def headings(path):
    out, fence = set(), False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                fence = not fence
            elif not fence and re.match(r"^#{1,6} ", line):
                out.add(slug(line.lstrip("#")))
    return out


def pages(root):
    found = [os.path.join(root, "README.md"), os.path.join(root, "CHANGELOG.md")]
    for sub in ("docs", "results", "suites", "profiles", "slurm", "tests"):
        for dirpath, dirnames, files in os.walk(os.path.join(root, sub)):
            dirnames[:] = [d for d in dirnames if d not in ("runs",)]
            found += [os.path.join(dirpath, f) for f in files if f.endswith(".md")]
    return [p for p in found if os.path.isfile(p)]


def check_page(root, path, problems):
    rel = os.path.relpath(path, root)
    fence = False
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for n, line in enumerate(lines, 1):
        if line.startswith("```"):
            fence = not fence
            continue
        for rx, what in HISTORY:
            if rel != "CHANGELOG.md" and rx.search(line):
                problems.append(f"{rel}:{n}: speaks of {what}: {rx.search(line).group(0)!r}")
        if fence:
            continue
        for target in LINK.findall(line):
            if re.match(r"^[a-z]+:", target):
                continue  # http:, https:, mailto:
            file_part, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            if not os.path.exists(dest):
                problems.append(f"{rel}:{n}: link to a missing file: {target}")
            elif anchor and dest.endswith(".md") and anchor not in headings(dest):
                problems.append(f"{rel}:{n}: link to a missing heading: {target}")
    return len(lines)


RUNNABLE = "<!-- runnable -->"


def runnable_blocks(path):
    """(line of the fence, text) of each block marked runnable."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out = []
    for i, line in enumerate(lines):
        if line.strip() == RUNNABLE and i + 1 < len(lines) and lines[i + 1].startswith("```"):
            body = []
            for line2 in lines[i + 2:]:
                if line2.startswith("```"):
                    break
                body.append(line2)
            out.append((i + 2, "\n".join(body)))
    return out


def run_blocks(root, bindir, problems):
    env = dict(os.environ, PATH=os.path.abspath(bindir) + os.pathsep + os.environ.get("PATH", ""),
               OPENBLAS_NUM_THREADS="1")
    count = 0
    for path in pages(root):
        rel = os.path.relpath(path, root)
        for line, text in runnable_blocks(path):
            count += 1
            print(f"{rel}:{line}: running", flush=True)
            try:
                r = subprocess.run(["bash", "-c", "set -euo pipefail\n" + text], cwd=root, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300,
                                   start_new_session=True)
                if r.returncode != 0:
                    tail = r.stdout.decode(errors="replace")[-1500:]
                    problems.append(f"{rel}:{line}: a runnable block exited {r.returncode}:\n{tail}")
            except subprocess.TimeoutExpired:
                problems.append(f"{rel}:{line}: a runnable block ran past 300 s")
    if count == 0:
        problems.append("no page marks a runnable block")
    return count


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--run", metavar="BINDIR", help="run the runnable blocks with BINDIR's asgd")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    problems = []
    if args.run:
        n = run_blocks(root, args.run, problems)
        for p in problems:
            print(p)
        print(f"{n} runnable blocks, {len(problems)} failed")
        return 1 if problems else 0
    for path in pages(root):
        n = check_page(root, path, problems)
        if os.path.basename(path) == "README.md" and os.path.dirname(path) == root \
                and n > README_MAX_LINES:
            problems.append(f"README.md: {n} lines, more than {README_MAX_LINES}: "
                            "the manual belongs in docs/")
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
