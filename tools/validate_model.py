#!/usr/bin/python3
"""Prints the performance model's validation table (tools/validate_model.sh):
for each pair of results files (real MPI run, virtual run on the profile) the
measured and predicted steady-state samples/s and mean staleness, and their
ratios, each run's throughput speedup over the same configuration's
L = 1 run where the table has one, and what bounded the modelled run (its
busiest resource's share of the time, and the cores').

Usage: validate_model.py PAIRS_FILE   (lines: label<TAB>virtual.h5<TAB>real.h5[<TAB>real.h5...])

A line is one round of a configuration: its virtual run (on a profile) and
its real runs, whose median throughput is the round's measured one, with that
run's staleness. Lines with the same label are rounds of one configuration
(each calibrated right before its real run): the row's ratio is the median of
the rounds' ratios, and the row shows that round's figures, so a drift of the
machine's speed between rounds is not charged to the model.
Exit 1 when a pair is outside the bounds (throughput within 10%, staleness
within 10% or 0.1 absolute below 1)."""
import json
import re
import sys

import h5py


def figures(path):
    """Steady-state samples/s (the updates after the first tenth, by their
    wall_s: start-up and shut-down left out on both sides) and mean staleness
    (over every gradient)."""
    with h5py.File(path, "r") as h:
        u = h["updates"]
        samples, wall = u["samples"][()], u["wall_s"][()]
        k0 = max(1, len(wall) // 10)
        rate = float(samples[k0 + 1:].sum() / (wall[-1] - wall[k0]))
        g = u["gradients"][()]
        tau = u["mean_tau"][()]
        mean_tau = float((g * tau).sum() / max(1, g.sum()))
    return rate, mean_tau


def bound(path):
    """What bounded a modelled run: its busiest resource and the cores' share
    (the performance model's account in the timing_model attribute)."""
    with h5py.File(path, "r") as h:
        tm = json.loads(h.attrs["timing_model"])
    b = tm.get("busiest")
    if not b:
        return "-"
    out = f"{b['resource']} {100 * b['share']:.0f}%"
    if "cores_share" in tm and b["resource"] != "cores":
        out += f"; cores {100 * tm['cores_share']:.0f}%"
    return out


def speedup_key(label):
    """(label without L=, L) for labels "MODEL L=n S=k PROTOCOL"; None otherwise."""
    m = re.fullmatch(r"(\S+) L=(\d+) (.*)", label)
    return (m.group(1) + " " + m.group(3), int(m.group(2))) if m else None


def rounds(path):
    """{label: [(virtual, [real, ...]), ...]} in the file's order."""
    out = {}
    for line in open(path):
        if not line.strip():
            continue
        label, virt, *reals = line.rstrip("\n").split("\t")
        if not reals:
            sys.exit(f"validate_model.py: {path}: '{label}' has no real run")
        out.setdefault(label, []).append((virt, reals))
    return out


def round_figures(virt, reals):
    """(ratio, measured rate, measured tau, predicted rate, predicted tau) of one round."""
    measured = sorted(figures(r) for r in reals)
    (mr, mt), (pr, pt) = measured[len(measured) // 2], figures(virt)
    return pr / mr, mr, mt, pr, pt


def main():
    rows, bad, most = [], 0, 1
    for label, rs in rounds(sys.argv[1]).items():
        each = sorted((round_figures(v, reals) + (v,) for v, reals in rs), key=lambda f: f[0])
        ratio, mr, mt, pr, pt, virt = each[len(each) // 2]
        tau_ok = abs(pt - mt) <= 0.1 if max(mt, pt) < 1 else abs(pt / mt - 1) <= 0.1
        ok = abs(ratio - 1) <= 0.1 and tau_ok
        bad += 0 if ok else 1
        spread = f"{ratio:.3f}" + (f" ({each[0][0]:.3f}..{each[-1][0]:.3f})" if len(each) > 1 else "")
        most = max(most, len(each))
        rows.append((label, mr, pr, spread, mt, pt, "yes" if ok else "NO", bound(virt)))
    # throughput speedup over the same configuration's L = 1 run, where there is one
    one = {}
    for r in rows:
        k = speedup_key(r[0])
        if k and k[1] == 1:
            one[k[0]] = r
    print("| run | measured samples/s (median of the real runs) | predicted | ratio | measured mean tau | predicted "
          "| within bounds | speedup over L = 1, measured | predicted | busiest in the model |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        k = speedup_key(r[0])
        base = one.get(k[0]) if k else None
        sm = f"{r[1] / base[1]:.2f}" if base else "-"
        sp = f"{r[2] / base[2]:.2f}" if base else "-"
        print(f"| {r[0]} | {r[1]:.0f} | {r[2]:.0f} | {r[3]} | {r[4]:.3f} | {r[5]:.3f} | {r[6]} | {sm} | {sp} | {r[7]} |")
    print(f"\n{len(rows) - bad} of {len(rows)} runs within bounds (throughput within 10%, mean staleness "
          f"within 10% or 0.1 absolute below 1)")
    if most > 1:
        print(f"up to {most} rounds a run, each calibrated right before its real run: a row is its round of "
              f"median ratio, the rounds' lowest and highest ratios in brackets")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
