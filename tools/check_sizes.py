#!/usr/bin/env python3
"""Source size limits of the layout (docs/ARCHITECTURE.md): no source file in
src/ above --max-file lines (default 450) and no function above --max-function
lines (default 60), counted from the line of its opening brace to its closing
one. Functions are found by brace matching on code with comments, strings and
character literals blanked: a brace block that follows a parameter list ")"
(optionally with const/override/noexcept/-> type/initialiser list) and is not
a control statement. Prints each file or function over the limit and exits 1
if there is any; tests are not checked (tests aside, as the layout says).

    tools/check_sizes.py [--root DIR] [--max-file N] [--max-function N]
"""
import argparse
import os
import re
import sys

EXT = (".cpp", ".hpp", ".cu", ".cuh", ".h")
CONTROL = re.compile(r"\b(if|for|while|switch|catch|do|else|return|sizeof|decltype)\s*$")


def blank(text):
    """Comments, strings and char literals replaced by spaces (newlines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i)); i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif c == 'R' and text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(n, j + 1)
            out.append(re.sub(r"[^\n]", " ", text[i:j])); i = j
        else:
            out.append(c); i += 1
    return "".join(out)


def functions(code):
    """(name, first line, lines) of each function body in code."""
    found, stack = [], []
    line = 1
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        elif c == "{":
            head = code[max(0, i - 400):i]
            stack.append((i, line, head))
        elif c == "}" and stack:
            start, first, head = stack.pop()
            # the text before the brace, without a trailing initialiser list or specifiers
            h = re.sub(r"\s+", " ", head).rstrip()
            h = re.sub(r"(\s*(const|override|final|noexcept|mutable|->\s*[\w:<>,\s*&]+))*$", "", h)
            h = re.sub(r"\)\s*:\s*[^;{}]*$", ")", h) if ":" in h[-300:] else h
            if not h.endswith(")"):
                continue
            depth, k = 0, len(h) - 1
            while k >= 0:  # the matching "("
                if h[k] == ")":
                    depth += 1
                elif h[k] == "(":
                    depth -= 1
                    if depth == 0:
                        break
                k -= 1
            before = h[:k].rstrip()
            if CONTROL.search(before) or not re.search(r"[\w>\]]$", before):
                continue
            name = re.findall(r"[\w:~<>]+$", before)
            found.append((name[0] if name else "?", first, line - first + 1))
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
    ap.add_argument("--max-file", type=int, default=450)
    ap.add_argument("--max-function", type=int, default=60)
    a = ap.parse_args()
    bad = 0
    for d, _, files in os.walk(a.root):
        for f in sorted(files):
            if not f.endswith(EXT):
                continue
            p = os.path.join(d, f)
            text = open(p, encoding="utf-8", errors="replace").read()
            rel = os.path.relpath(p, os.path.dirname(os.path.abspath(a.root)))
            n = text.count("\n")
            if n > a.max_file:
                print(f"{rel}: {n} lines (limit {a.max_file})"); bad += 1
            for name, first, lines in functions(blank(text)):
                if lines > a.max_function:
                    print(f"{rel}:{first}: function {name} has {lines} lines (limit {a.max_function})"); bad += 1
    print(f"{bad} over the limits" if bad else "every source file and function within the limits")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
