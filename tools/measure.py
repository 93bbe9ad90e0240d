#!/usr/bin/python3
"""Runs the benchmarks and writes the tables of docs/MEASUREMENTS.md.

usage: tools/measure.py [--list] [--check] [--only NAMES] [--skip NAMES]
                        [--page FILE] [--build DIR] [--work DIR] [--tag TAG]

Each section of the page is a block between `<!-- measure:NAME -->` and
`<!-- /measure:NAME -->`. This script runs the section's commands from the
repository's root, and puts their standard output into the block beneath one
line that names the commands, how long they took, the CPU, the BLAS kernel,
the commit and the date. The text outside the blocks is the page's own and is
never touched. A section is written as soon as it ends (temporary file, then
rename), so a run that is stopped keeps what it finished; a section that
fails, or whose needs (root, PyTorch, an OpenMP or Open MPI build, a GPU) are not
met, keeps its earlier block and is named at the end (exit 1 when one
failed).

The sections whose figures belong to the CPU (the machine, the training
engine, PyTorch, OpenMP) keep one block per CPU, `<!-- measure:NAME@TAG -->`,
TAG from the CPU's model name (amd-epyc, intel-xeon; '-avx2' added for a CPU without
AVX-512, as a Zen 3 EPYC that a virtual machine names like a Zen 4): a run on a CPU the page
has no block for adds one after the section's other blocks, so the figures of
every CPU measured stay side by side.

  --list         the sections, what each needs and about how long it takes
  --check        check the page only: every block names a section and has its
                 header line, every section has a block (exit 1 otherwise)
  --only NAMES   these sections (comma-separated), in the page's order
  --skip NAMES   all but these
  --page FILE    the page (default docs/MEASUREMENTS.md)
  --build DIR    the Serial build with asgd, asgd_micro, asgd_transport and
                 bench_report (default build/ci, else build/default)
  --work DIR     scratch folder for results and logs (default /tmp/asgd-measure)
  --tag TAG      the per-CPU blocks' tag (default: from the CPU's model name)

The whole set takes about three hours on 2 cores (--list gives each section's
figure); run it on an otherwise idle machine, since every figure is a speed.
"""
import argparse
import datetime
import os
import re
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"


class Section:
    def __init__(self, name, minutes, cmds, needs=(), start=None, what="", ok=(0,), per_cpu=False):
        self.name, self.minutes, self.cmds = name, minutes, cmds
        self.needs, self.start, self.what, self.ok = tuple(needs), start, what, ok
        self.per_cpu = per_cpu


def suite_table(suite, work):
    """A paper suite run from an empty folder, then its report's table beside the paper and the
    count of verdicts per claim."""
    return (f"rm -rf {{w}}/{work} && {{b}}/asgd sweep run suites/{suite}.yaml --jobs 2 --results {{w}}/{work} "
            f"> /dev/null && sed -n '/^## Beside the paper/,/^## /p' {{w}}/{work}/{suite}/report/report.md "
            f"| grep -E '^(\\||- )'")


# {b}: the Serial build folder; {w}: the scratch folder. One thread per rank throughout.
# ok: the exit codes that still mean a measurement (the validation tools exit 1
# when a row is outside the model's bounds, and say so in their table).
SECTIONS = [
    Section("machine", 0.1, ["{b}/asgd info"], what="the machine", per_cpu=True),
    Section("micro", 0.7, ["{b}/asgd_micro --benchmark_filter='sgemm|triad|^lenet/|^cifar10-18pct/' "
                           "--benchmark_color=false"], start=r"^Kokkos ",
            what="each layer and the step by phase against the same run's sgemm and triad", per_cpu=True),
    Section("step-profile", 2, ["tools/profile_step.sh -b {b}"], needs=["perf"], start=r"^CPU: ",
            what="the step's time by function (perf): OpenBLAS's micro-kernel, its packing, the project's kernels",
            per_cpu=True),
    Section("training", 4, ["{b}/asgd train --model lenet --dataset fashion-mnist --epochs 3 --lr 0.01 "
                            "--eval-every 1 --target-error 0.1 --results {w}/training"], start=r"^run ",
            what="lenet on Fashion-MNIST, one learner, 3 epochs", per_cpu=True),
    Section("pytorch", 3, ["ASGD={b}/asgd tools/peers/compare_lenet.sh -n 3"], needs=["torch"],
            what="one learner against PyTorch, same model, data and recipe", per_cpu=True),
    Section("pytorch-2t", 3, ["THREADS=2 ASGD=build/openmp/asgd tools/peers/compare_lenet.sh -n 3"],
            needs=["torch", "openmp"], what="one learner on 2 threads against PyTorch on 2 threads", per_cpu=True),
    Section("openmp", 6, ["tools/bench_openmp.sh -r 5 -l"], needs=["openmp"],
            what="Kokkos' OpenMP backend at 1 and 2 threads", per_cpu=True),
    Section("transport", 0.5, ["mpiexec -n 2 {b}/asgd_transport 7"],
            what="push and pull against plain MPI point-to-point"),
    Section("scaling", 12, ["ASGD={b}/asgd tools/bench_scaling.sh -r 5 -w 'yield yield-copy' 200"],
            what="the MPI core's own cost on one node", per_cpu=True),
    Section("short-steps", 4, ["ASGD={b}/asgd tools/bench_short_steps.sh -r 5"],
            what="short steps with more ranks than cores, unbound and bound to cores", per_cpu=True),
    Section("distributed", 5, ["ASGD={b}/asgd tools/peers/compare_distributed.sh -n 3",
                               "ASGD={b}/asgd tools/peers/compare_allreduce.sh -n 3"], needs=["torch"],
            what="two learners against PyTorch DDP and Hogwild"),
    Section("virtual", 2, [PY + " tools/bench_virtual.py --asgd {b}/asgd"],
            what="virtual learners' cost and memory"),
    Section("model", 45, ["ASGD={b}/asgd tools/validate_model.sh -r 3 -o {w}/model"],
            what="the performance model, predicted against measured on one node", ok=(0, 1), per_cpu=True),
    Section("cluster", 80, ["tools/validate_cluster.sh -L '1 2 4 6 8' -S '1 2 4' -p 'hardsync softsync nsync' -u 8 "
                           "-r 3 -l 200mbit -o {w}/cluster",
                           "tools/zhang_speedup.sh -c -o {w}/zhang-cluster"], needs=["root", "ompi"],
            what="the model across the emulated cluster's nodes", ok=(0, 1), per_cpu=True),
    Section("papers", 1, [suite_table("paine2013-virtual-quick", "papers")],
            what="the quick Paine suite's table beside the paper (modelled time)"),
    Section("paine-full", 32, [suite_table("paine2013-virtual", "paine-full")],
            what="the full Paine suite (34 configurations x 3 seeds, modelled time) beside the paper"),
    Section("paine-coldstart", 6, [suite_table("paine2013-coldstart", "paine-coldstart")],
            what="Paine's cold-start claim put to a test (10 configurations x 3 seeds, modelled time)"),
    Section("zhang-speedup", 10, ["ASGD={b}/asgd tools/zhang_speedup.sh -o {w}/zhang-speedup > /dev/null && "
                                 "grep -E '^(cores|waiting_rank_load):|^ +seconds:' profiles/local.yaml && for s in zhang2015-speedup zhang2015-speedup-real; do "
                                 "echo; echo \"$s:\"; sed -n '/^### Throughput speedup/,/^## /p' {w}/zhang-speedup/$s/report/report.md "
                                 "| grep '^|'; done && echo && echo 'zhang2015-speedup beside the paper:' && "
                                 "sed -n '/^## Beside the paper/,/^### /p' {w}/zhang-speedup/zhang2015-speedup/report/report.md "
                                 "| grep -E '^(\\||- )'"],
            what="Zhang's throughput speedup: the paper's profile, this machine's, and L = 1, 2 measured"),
    Section("zhang-full", 50, [suite_table("zhang2015", "zhang-full")],
            what="the full Zhang suite (9 configurations x 3 seeds, 4 epochs, modelled time) beside the paper"),
    Section("gate", 60, ["tools/ci/measure.sh {w}/gate --asgd {b}/asgd --pairs 10 --rounds 5 "
                         "--plant '--candidate-hog 2:0.25' --plant \"--candidate-prefix 'taskset -c 0'\" "
                         "> {w}/gate.log && cat {w}/gate/summary.txt"],
            what="how often the CI gate cries wolf on the same commit, and what planted slowdowns it flags"),
    Section("gate-plants", 25, ["cmake --preset ci -B {w}/o1 -DCMAKE_CXX_FLAGS_RELEASE='-O1 -DNDEBUG' > /dev/null && "
                                "cmake --build {w}/o1 -j 2 --target asgd asgd_micro > /dev/null && "
                                "tools/ci/measure.sh {w}/gate-plants --asgd {b}/asgd --pairs 0 --rounds 5 "
                                "--plant '--candidate-asgd {w}/o1/asgd' "
                                "--plant \"--candidate-env OPENBLAS_CORETYPE=Haswell --gate-args '--across-machines'\" "
                                "--plant '--candidate-hog 2:0.1' > {w}/gate-plants.log && "
                                "grep -E '^(CPU|asgd|rounds|==|  planted)' {w}/gate-plants/summary.txt"],
            what="the gate against planted slowdowns of other kinds: the same code built -O1, OpenBLAS's "
                 "kernel forced to Haswell's, a lighter CPU hog", per_cpu=True),
    Section("gate-sensitivity", 48, ["tools/ci/measure.sh {w}/gate-sensitivity --asgd {b}/asgd --pairs 0 --rounds 5 "
                                     + " ".join(["--plant '--candidate-hog 2:0.1'"] * 10)
                                     + " > {w}/gate-sensitivity.log && "
                                     "grep -E '^(CPU|asgd|rounds|==|  planted)' {w}/gate-sensitivity/summary.txt"],
            what="the gate's sensitivity: ten tries of a slowdown near its threshold (a CPU hog of 10% duty "
                 "on each core while the candidate runs)", per_cpu=True),
    Section("gate-false", 47, ["tools/ci/measure.sh {w}/gate-false --asgd {b}/asgd --pairs 10 --rounds 5 "
                               "> {w}/gate-false.log && "
                               "grep -E '^(CPU|asgd|rounds|==|  pair-|  same commit)' {w}/gate-false/summary.txt"],
            what="the gate's false alarms: ten same-commit pairs, interleaved and against the previous pair's "
                 "stored baseline, at three thresholds", per_cpu=True),
    Section("gpu", 8, ["tools/gpu-check.sh --out {w}/gpu --steps 50"], needs=["gpu"], start=r"^== gpu-bench ==$",
            what="GPU learners: the GPU tests, steps against cuBLAS SGEMM, lenet against a CPU learner, staging"),
    Section("suites", 0.3, ["{py} tools/measure.py --time-suites {b} --work {w}",
                            "{b}/bench_report --benchmark_color=false"], start=r"^-{10}",
            what="planning, submitting and reporting large suites"),
]


def time_suites(build, work):
    """The suites section: median of 3 wall times of each command."""
    work = os.path.join(work, "suites")
    cmds = [("plan 10,000 runs", f"{build}/asgd sweep plan tests/data/suite_10k.yaml"),
            ("submit 10,000 runs, dry run (configs, array script, report job)",
             f"{build}/asgd sweep submit tests/data/suite_10k.yaml --dry-run --results {work}"),
]
    print("| what | seconds (median of 3) | command |\n|---|---|---|")
    for label, cmd in cmds:
        times = []
        for _ in range(3):
            subprocess.run(["rm", "-rf", work])
            t0 = time.perf_counter()
            subprocess.run(cmd, shell=True, cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            times.append(time.perf_counter() - t0)
        times.sort()
        print(f"| {label} | {times[1]:.2f} | `{cmd.replace(build, '<build>').replace(work, '<work>/suites')}` |")
    return 0


def need_met(need):
    if need == "root":
        return os.geteuid() == 0
    if need == "torch":
        return subprocess.run([PY, "-c", "import torch, h5py"], capture_output=True).returncode == 0
    if need == "openmp":
        return os.access(os.path.join(ROOT, "build/openmp/asgd_micro"), os.X_OK)
    if need == "gpu":
        return subprocess.run("nvidia-smi -L", shell=True, capture_output=True).returncode == 0
    if need == "ompi":
        return os.access(os.path.join(ROOT, "build/ompi/asgd"), os.X_OK)
    if need == "perf":
        allowed = os.geteuid() == 0
        if not allowed:
            try:
                with open("/proc/sys/kernel/perf_event_paranoid") as f:
                    allowed = int(f.read()) <= 1
            except (OSError, ValueError):
                pass
        return allowed and shutil.which("perf") is not None
    return False


def machine_line(build):
    cpu = cpuinfo("model name") or "unknown CPU"
    kernel = "?"
    info = subprocess.run([os.path.join(build, "asgd"), "info"], capture_output=True, text=True).stdout
    m = re.search(r"\(core (\w+)\)", info)
    if m:
        kernel = m.group(1)
    commit = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip() or "?"
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "src", "tools", "tests"],
                           cwd=ROOT, capture_output=True, text=True).stdout.strip()
    return cpu, os.cpu_count(), kernel, commit + ("+changes" if dirty else "")


def as_markdown(text):
    """Table lines as they are; every other run of lines in a text block."""
    out, plain = [], []

    def flush():
        while plain and not plain[-1].strip():
            plain.pop()
        while plain and not plain[0].strip():
            plain.pop(0)
        if plain:
            out.extend(["```text", *plain, "```", ""])
        plain.clear()

    for line in text.splitlines():
        if line.startswith("|"):
            flush()
            out.append(line)
        else:
            if out and out[-1].startswith("|"):
                out.append("")
            plain.append(line)
    flush()
    return "\n".join(out).rstrip() + "\n"


BLOCK = re.compile(r"<!-- measure:([\w-]+)(?:@([\w-]+))? -->\n(.*?)<!-- /measure:\1(?:@\2)? -->\n", re.S)
NOT_MEASURED = re.compile(r"^Not measured: .+\.$", re.M)
HEADER = re.compile(r"^Measured with .+ \(\d+ s\) on .+, BLAS kernel \S+, commit \S+, \d{4}-\d\d-\d\d\.$", re.M)


def cpu_tag(cpu, flags=None):
    """amd-epyc, intel-xeon, ...: the first two words of the model name, lower case, and
    '-avx2' where the CPU has no AVX-512: a virtual machine may name two generations alike
    ('AMD EPYC' for a Zen 3 and a Zen 4), and their figures differ."""
    words = re.sub(r"\((r|tm)\)", "", cpu.lower())
    words = [w for w in re.findall(r"[a-z0-9]+", words) if w not in ("processor", "cpu")]
    tag = "-".join(words[:2]) or "unknown-cpu"
    if flags is None:
        flags = cpu_flags()
    return tag if "avx512f" in flags or not flags else tag + "-avx2"


def cpuinfo(field):
    """The first CPU's FIELD in /proc/cpuinfo ('model name', 'flags'), or None."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(field):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_flags():
    return set((cpuinfo("flags") or "").split())


def run_section(sec, build, work, machine):
    os.makedirs(work, exist_ok=True)
    log = os.path.join(work, f"{sec.name}.log")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    out = []
    t0 = time.time()
    with open(log, "w") as err:
        for cmd in sec.cmds:
            cmd = cmd.format(b=build, w=work, py=PY)
            p = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=err, text=True)
            if p.returncode not in sec.ok:
                return None, f"`{cmd}` exited {p.returncode} (log: {log})"
            text = re.sub(r"\x1b\[[0-9;]*m", "", p.stdout)
            if sec.start:
                m = re.search(sec.start, text, re.M)
                text = text[m.start():] if m else text
            out.append(as_markdown(text))
    took = round(time.time() - t0)
    cpu, ncpu, kernel, commit = machine
    shown = "; ".join(f"`{c.format(b='<build>', w='<work>', py='python3')}`" for c in sec.cmds)
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    head = (f"Measured with {shown} ({took} s) on {cpu} ({ncpu} vCPUs), BLAS kernel {kernel}, commit {commit}, "
            f"{date}.")
    return head + "\n\n" + "\n".join(out), None


def block_name(sec, tag):
    return f"{sec.name}@{tag}" if sec.per_cpu else sec.name


def blocks(text):
    """(full name, section name, body, match) of every block, in the page's order."""
    return [((m.group(1) + "@" + m.group(2)) if m.group(2) else m.group(1), m.group(1), m.group(3), m)
            for m in BLOCK.finditer(text)]


def replace_block(page, name, body):
    """Writes a block's body; a per-CPU block the page lacks goes after its section's last block."""
    with open(page) as f:
        text = f.read()
    section = name.split("@")[0]
    found = blocks(text)
    new_block = f"<!-- measure:{name} -->\n{body}<!-- /measure:{name} -->\n"
    same = [b for b in found if b[0] == name]
    if same:
        m = same[0][3]
        new = text[:m.start()] + new_block + text[m.end():]
    else:
        siblings = [b for b in found if b[1] == section]
        if "@" not in name or not siblings:
            raise SystemExit(f"measure.py: {page} has no block for section '{name}'")
        end = siblings[-1][3].end()
        new = text[:end] + new_block + text[end:]
    tmp = page + ".tmp"
    with open(tmp, "w") as f:
        f.write(new)
    os.replace(tmp, page)


def block_body(page, name):
    with open(page) as f:
        return next((b[2] for b in blocks(f.read()) if b[0] == name), None)


def check(page):
    with open(page) as f:
        text = f.read()
    by_name = {s.name: s for s in SECTIONS}
    found, bad = set(), []
    for full, section, body, _ in blocks(text):
        sec = by_name.get(section)
        if sec is None:
            bad.append(f"{page}: block '{full}' is no section of tools/measure.py")
            continue
        found.add(section)
        if sec.per_cpu != ("@" in full):
            bad.append(f"{page}: block '{full}': section '{section}' keeps "
                       + ("one block per CPU, named '" + section + "@TAG'" if sec.per_cpu else "one block, without '@TAG'"))
        elif not HEADER.search(body) and not NOT_MEASURED.search(body):
            bad.append(f"{page}: block '{full}' has no 'Measured with ... commit ..., DATE.' line")
    bad += [f"{page}: no block for section '{n}'" for n in by_name if n not in found]
    if len(re.findall(r"^<!-- measure:", text, re.M)) != len(blocks(text)):
        bad.append(f"{page}: a '<!-- measure:NAME -->' line without its '<!-- /measure:NAME -->'")
    for line in bad:
        print(line, file=sys.stderr)
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(usage=__doc__.split("\n\n")[1].split("usage: ")[1])
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--only", default="")
    ap.add_argument("--skip", default="")
    ap.add_argument("--page", default=os.path.join(ROOT, "docs/MEASUREMENTS.md"))
    ap.add_argument("--build", default="")
    ap.add_argument("--work", default="/tmp/asgd-measure")
    ap.add_argument("--tag", default="")
    ap.add_argument("--time-suites", metavar="BUILD", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.time_suites:
        return time_suites(a.time_suites, os.path.abspath(a.work))
    names = [s.name for s in SECTIONS]
    for opt, value in (("--only", a.only), ("--skip", a.skip)):
        for n in filter(None, value.split(",")):
            if n not in names:
                print(f"measure.py: {opt}: no section '{n}' (sections: {', '.join(names)})", file=sys.stderr)
                return 2
    if a.tag and not re.fullmatch(r"[a-z0-9][a-z0-9-]*", a.tag):
        print(f"measure.py: --tag '{a.tag}': lower-case letters, digits and '-' only", file=sys.stderr)
        return 2
    if not os.path.isfile(a.page):
        print(f"measure.py: --page {a.page}: no such file", file=sys.stderr)
        return 2
    if a.check:
        return check(a.page)
    build = a.build or next((b for b in ("build/ci", "build/default") if os.path.isdir(os.path.join(ROOT, b))), "")
    build = os.path.abspath(os.path.join(ROOT, build)) if build else ""
    chosen = [s for s in SECTIONS if (not a.only or s.name in a.only.split(",")) and s.name not in a.skip.split(",")]
    if a.list:
        for s in SECTIONS:
            print(f"{s.name:<14} {s.minutes:>5.1f} min  {s.what}" + (f" (needs {', '.join(s.needs)})" if s.needs else "")
                  + (" [a block per CPU]" if s.per_cpu else ""))
        print(f"{'all':<14} {sum(s.minutes for s in SECTIONS):>5.1f} min")
        return 0
    if not build or not os.access(os.path.join(build, "asgd"), os.X_OK):
        print(f"measure.py: --build {a.build or 'build/ci'}: no asgd built there", file=sys.stderr)
        return 2
    machine = machine_line(build)
    tag = a.tag or cpu_tag(machine[0])
    start, failed, skipped = time.time(), [], []
    total = sum(s.minutes for s in chosen)
    for i, s in enumerate(chosen, 1):
        missing = [n for n in s.needs if not need_met(n)]
        if missing:
            skipped.append(f"{s.name} (needs {', '.join(missing)})")
            print(f"[{i}/{len(chosen)}] {s.name}: skipped, needs {', '.join(missing)}", file=sys.stderr)
            body = block_body(a.page, block_name(s, tag))
            if body is not None and not body.strip():
                replace_block(a.page, block_name(s, tag), f"Not measured: needs {', '.join(missing)}, which the machines of "
                              f"this page's other sections did not have.\n")
            continue
        print(f"[{i}/{len(chosen)}] {s.name} (about {s.minutes:g} of {total:g} min; "
              f"{round(time.time() - start)} s so far)", file=sys.stderr)
        body, err = run_section(s, build, os.path.abspath(a.work), machine)
        if err:
            failed.append(s.name)
            print(f"measure.py: {s.name}: {err}; its block is left as it was", file=sys.stderr)
            continue
        replace_block(a.page, block_name(s, tag), body)
    print(f"took {round(time.time() - start)} s" + (f"; skipped: {', '.join(skipped)}" if skipped else "")
          + (f"; failed: {', '.join(failed)}" if failed else ""), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
