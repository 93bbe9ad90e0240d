#!/usr/bin/env python3
"""The kernels at the compiler's baseline target: a build with -DASGD_ARCH= (no AVX;
docs/INSTALL.md, "CPU target") must compile as the native one does, warnings being
errors (e.g. a 32-byte vector passed to or returned from a function is an ABI note,
-Wpsabi, without AVX). Recompiles, from a build folder's compile_commands.json, every
source under src/ that includes a kernels header, with its -march= replaced by
-march=x86-64, at -O0 (the check is of the code, not its speed), into a temporary
folder. Exit 0 when all compile, 1 naming the first that does not, 77 (skipped) when
the folder has no compile database or no such source.

    tools/check_portable.py BUILD_DIR
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    db = os.path.join(sys.argv[1], "compile_commands.json")
    if not os.path.isfile(db):
        print(f"check_portable: skipped (no {db})")
        return 77
    entries = []
    for e in json.load(open(db)):
        path = e["file"]
        if "/src/" not in path or not path.endswith(".cpp") or not os.path.isfile(path):
            continue
        if '#include "kernels/' not in open(path, encoding="utf-8", errors="replace").read():
            continue
        args = e["arguments"] if "arguments" in e else shlex.split(e["command"])
        if not any(a.startswith("-march=") for a in args):
            continue
        entries.append((e["directory"], path, args))
    if not entries:
        print("check_portable: skipped (no source with a kernels header built with -march=)")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        for i, (cwd, path, args) in enumerate(entries):
            out, cmd, skip = os.path.join(tmp, f"{i}.o"), [], False
            for a in args:
                if skip:
                    skip = False
                    continue
                if a == "-o":
                    cmd += ["-o", out]
                    skip = True
                elif a.startswith("-march="):
                    cmd.append("-march=x86-64")
                elif re.fullmatch(r"-O[0-3sg]?", a):
                    cmd.append("-O0")
                elif a in ("-MT", "-MF", "-MQ"):  # dependency files: not for this compile
                    skip = True
                elif a in ("-MD", "-MMD"):
                    continue
                else:
                    cmd.append(a)
            if "-Werror" not in cmd:
                cmd.append("-Werror")
            r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
            if r.returncode != 0:
                first = next((ln for ln in r.stderr.splitlines() if "error" in ln), r.stderr.strip()[:300])
                print(f"check_portable: {os.path.relpath(path)} does not compile at -march=x86-64: {first}")
                return 1
    print(f"check_portable: {len(entries)} sources with kernels headers compile at -march=x86-64")
    return 0


if __name__ == "__main__":
    sys.exit(main())
