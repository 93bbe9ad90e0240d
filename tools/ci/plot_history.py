#!/usr/bin/python3
"""PNG plots of a benchmark history, run by `asgd history`.

usage: plot_history.py OUT_DIR

Reads OUT_DIR/history.csv (one row per series and point, written by `asgd
history` before it runs this script) and writes OUT_DIR/history-01.png,
history-02.png, ...: small multiples, 12 series a page, series with steps
first. Each panel shows the median of every point (commit) normalised to the
series' median, its min-max range as a bar, the level of each segment between
steps as a line, and each step as a vertical line (red: regression, green:
improvement). The x axis is the point order (time), labelled with commits.
Needs matplotlib (Debian: python3-matplotlib).
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PER_PAGE = 12
COLS = 3


def number(text):
    try:
        return float(text)
    except ValueError:
        return float("nan")


def load(path):
    series = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            key = (row["figure"], row["machine"])
            s = series.setdefault(key, {"unit": row["unit"], "better": row["better"], "points": []})
            s["points"].append(row)
    for s in series.values():
        s["points"].sort(key=lambda r: int(r["point"]))
    return series


def short(label):
    # "commit" (one point per commit), or "commit@input" (--by-input): the input's last two path parts
    if "@" in label:
        return "/".join(label.split("@", 1)[1].rstrip("/").split("/")[-2:])[-24:]
    return label if len(label) <= 9 else label[:9]


def panel(ax, key, s, several_machines):
    pts = s["points"]
    x = list(range(len(pts)))
    med = [number(p["normalised"]) for p in pts]
    norm = [number(p["median"]) / number(p["normalised"]) if number(p["normalised"]) else float("nan")
            for p in pts]
    lo = [number(p["min"]) / n if n else float("nan") for p, n in zip(pts, norm)]
    hi = [number(p["max"]) / n if n else float("nan") for p, n in zip(pts, norm)]
    lvl = [number(p["level"]) for p in pts]
    ax.vlines(x, lo, hi, color="0.6", linewidth=1)
    ax.plot(x, med, "o", color="tab:blue", markersize=3)
    ax.step(x, lvl, where="mid", color="black", linewidth=1)
    for i, p in enumerate(pts):
        if p["step"]:
            ax.axvline(i - 0.5, color="tab:red" if p["step"] == "regression" else "tab:green", linewidth=1.5)
    ax.axhline(1.0, color="0.85", linewidth=0.8, zorder=0)
    title = key[0] + (f"\n{key[1]}" if several_machines else "")
    ax.set_title(title, fontsize=7)
    better = "higher is better" if s["better"] == "higher" else "lower is better"
    ax.set_ylabel(f"/ median ({better})", fontsize=6)
    step = max(1, len(pts) // 12)
    ax.set_xticks(x[::step])
    ax.set_xticklabels([short(p["label"]) for p in pts][::step], rotation=60, fontsize=5, ha="right")
    ax.tick_params(axis="y", labelsize=6)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    series = load(os.path.join(out, "history.csv"))
    several = len({k[1] for k in series}) > 1
    order = sorted(series, key=lambda k: (not any(p["step"] for p in series[k]["points"]), k))
    for page, start in enumerate(range(0, len(order), PER_PAGE), 1):
        keys = order[start:start + PER_PAGE]
        rows = (len(keys) + COLS - 1) // COLS
        fig, axes = plt.subplots(rows, COLS, figsize=(4.2 * COLS, 2.9 * rows), squeeze=False)
        for ax in axes.flat[len(keys):]:
            ax.axis("off")
        for ax, key in zip(axes.flat, keys):
            panel(ax, key, series[key], several)
        fig.tight_layout()
        path = os.path.join(out, f"history-{page:02d}.png")
        fig.savefig(path, dpi=110)
        plt.close(fig)
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
