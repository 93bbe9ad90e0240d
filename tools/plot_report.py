#!/usr/bin/python3
"""PNG plots of one suite's results, run by `asgd report`.

usage: plot_report.py SUITE_DIR OUT_DIR --default-merge RULE [--reference PAPER.json]

Reads SUITE_DIR/runs/*.h5 (layout: results/README.md) and OUT_DIR/speedup.csv
(written by `asgd report` before it runs this script) and writes into OUT_DIR:

  error_vs_time.png    test error (/evals) against training time, one line per run
  error_vs_epochs.png  test error against epochs, one line per run
  speedup.png          throughput and time-to-target speedup against learners, ideal line
  staleness.png        staleness histogram per run (the first 12 runs)
  paper.png            with --reference (a paper's suite): the paper's stated speedups and
                       errors beside ours, one panel per kind of claim with a number or a shape,
                       and for a claim stated per learner count (Paine: 1 and 8 clients) our
                       training error against time for those counts with the paper's values

Lines are coloured per protocol; diverged runs are dashed and end in a cross
(plotted as far as they got). Unreadable files are skipped with a warning.
A stored configuration leaves out what was not given: --default-merge is nsync's merge
rule when none is stored (`asgd report` passes the one the software uses).
Needs matplotlib and h5py (Debian: python3-matplotlib python3-h5py).
"""
import argparse
import csv
import glob
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import h5py  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402
from scipy import stats  # noqa: E402

MAX_HISTOGRAMS = 12
SCHEMA_VERSION = 1  # results layout this script reads (results/README.md)


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def load_run(path):
    with h5py.File(path, "r") as f:
        if "schema_version" not in f.attrs:
            raise ValueError("not an asgd results file (no schema_version attribute)")
        if "magic" in f.attrs:
            raise ValueError("is an asgd checkpoint, not a results file")
        if int(f.attrs["schema_version"]) > SCHEMA_VERSION:
            raise ValueError(f"schema version {int(f.attrs['schema_version'])} is newer than this script "
                             f"({SCHEMA_VERSION})")
        attrs = {k: text(f.attrs[k]) for k in ("run_id", "status", "protocol", "model", "mode")}
        try:
            config = json.loads(text(f.attrs["config"]))
        except (KeyError, ValueError):
            config = {}
        evals = {k: f["evals"][k][:] for k in ("epoch", "wall_s", "test_error")}
        updates = {k: f["updates"][k][:] for k in ("wall_s", "train_error", "gradients")} if "updates" in f else {}
        hist = f["staleness"]["histogram"][:]
    # the series asgd validate would refuse (asgd report lists the file as unreadable)
    if len({len(v) for v in evals.values()}) != 1 or any(np.ndim(v) != 1 for v in evals.values()):
        raise ValueError("the /evals series differ in length")
    config = config if isinstance(config, dict) else {}
    attrs["learners"] = config.get("learners", "?")
    return {"file": path, **attrs, "evals": evals, "histogram": hist, "config": config, "updates": updates}


def colours(runs):
    protocols = sorted({r["protocol"] for r in runs})
    cmap = plt.get_cmap("tab10")
    return {p: cmap(i % 10) for i, p in enumerate(protocols)}


def empty_figure(path, message):
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center")
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_errors(runs, out_dir, xkey, xlabel, name):
    path = os.path.join(out_dir, name)
    with_evals = [r for r in runs if len(r["evals"]["test_error"]) > 0]
    if not with_evals:
        empty_figure(path, "no test evaluations in any run")
        return
    colour = colours(runs)
    fig, ax = plt.subplots(figsize=(8, 5))
    seen = set()
    for r in with_evals:
        x = np.asarray(r["evals"][xkey], dtype=float)
        y = 100 * np.asarray(r["evals"]["test_error"], dtype=float)
        keep = np.isfinite(x) & np.isfinite(y)  # a diverged run's last evaluations may be NaN
        x, y = x[keep], y[keep]
        if len(x) == 0:
            continue
        diverged = r["status"] == "diverged"
        label = r["protocol"] if r["protocol"] not in seen else None
        seen.add(r["protocol"])
        ax.plot(x, y, color=colour[r["protocol"]], linestyle="--" if diverged else "-",
                marker="o" if len(x) == 1 else None, linewidth=1.2, alpha=0.8, label=label)
        if diverged:
            ax.plot(x[-1:], y[-1:], marker="x", color=colour[r["protocol"]], markersize=9)
    if any(r["status"] == "diverged" for r in with_evals):
        ax.plot([], [], color="grey", linestyle="--", marker="x", label="diverged")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("test error (%)")
    ax.set_title(f"Test error, {len(with_evals)} run{'' if len(with_evals) == 1 else 's'}")
    ax.grid(alpha=0.3)
    ax.legend(title="protocol", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def number(cell):
    try:
        v = float(cell)
    except (TypeError, ValueError):
        return math.nan
    return v


def plot_speedup(out_dir):
    path = os.path.join(out_dir, "speedup.png")
    csv_path = os.path.join(out_dir, "speedup.csv")
    if not os.path.exists(csv_path):
        empty_figure(path, "no speedup.csv")
        return
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    series = {}
    for row in rows:
        label = row["protocol"]
        if row.get("n") and row["protocol"] == "softsync":
            label += f" n={row['n']}"
        if row.get("n_sync") and row["protocol"] == "nsync":
            label += f" n_sync={row['n_sync']}"
        if row.get("lr_policy"):
            label += f" {row['lr_policy']}"
        label = f"{row['model']} {label}" if len({r['model'] for r in rows}) > 1 else label
        series.setdefault(label, []).append(row)
    fig, ax = plt.subplots(figsize=(8, 5))
    cmap = plt.get_cmap("tab10")
    max_l = 1
    plotted = 0
    for i, (label, rs) in enumerate(sorted(series.items())):
        rs = sorted(rs, key=lambda r: number(r["learners"]))
        for kind, marker, style in (("throughput_speedup", "o", "-"), ("time_to_target_speedup", "s", ":")):
            pts = [(number(r["learners"]), number(r[f"{kind}_mean"]),
                    number(r[f"{kind}_ci_low"]), number(r[f"{kind}_ci_high"])) for r in rs]
            pts = [p for p in pts if not math.isnan(p[0]) and not math.isnan(p[1])]
            if not pts:
                continue
            x, y, lo, hi = (np.array(v) for v in zip(*pts))
            yerr = np.vstack([np.where(np.isnan(lo), 0, y - lo), np.where(np.isnan(hi), 0, hi - y)])
            ax.errorbar(x, y, yerr=yerr, color=cmap(i % 10), marker=marker, linestyle=style, capsize=3,
                        label=f"{label} ({'throughput' if kind.startswith('throughput') else 'time to target'})")
            max_l = max(max_l, x.max())
            plotted += 1
    if plotted == 0:
        plt.close(fig)
        empty_figure(path, "no speedup figures (no 1-learner baseline, or no completed runs)")
        return
    ideal = np.array([1, max_l])
    ax.plot(ideal, ideal, color="black", linestyle="--", linewidth=1, label="ideal (speedup = L)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("learners L")
    ax.set_ylabel("speedup over 1 learner")
    ax.set_title("Speedup (mean and 95% interval over seeds)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="x-small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def plot_staleness(runs, out_dir):
    path = os.path.join(out_dir, "staleness.png")
    shown = runs[:MAX_HISTOGRAMS]
    if not shown:
        empty_figure(path, "no runs")
        return
    cols = min(4, len(shown))
    rows = math.ceil(len(shown) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False)
    colour = colours(runs)
    for ax, r in zip(axes.flat, shown):
        h = r["histogram"]
        title = f"{r['run_id'][-28:]}\n{r['protocol']} L={r['learners']}"
        if r["status"] != "completed":
            title += f" ({r['status']})"
        ax.set_title(title, fontsize="small")
        if len(h) == 0 or h.sum() == 0:
            ax.text(0.5, 0.5, "no staleness data", ha="center", va="center", transform=ax.transAxes)
            ax.set_xticks([])
            ax.set_yticks([])
        else:
            ax.bar(np.arange(len(h)), h, color=colour[r["protocol"]], width=0.9)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("tau", fontsize="small")
        ax.set_ylabel("gradients", fontsize="small")
        ax.tick_params(labelsize="x-small")
    for ax in list(axes.flat)[len(shown):]:
        ax.axis("off")
    if len(runs) > MAX_HISTOGRAMS:
        fig.suptitle(f"Staleness histograms (first {MAX_HISTOGRAMS} of {len(runs)} runs)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def read_csv(out_dir, name):
    path = os.path.join(out_dir, name)
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def claim_learners(claim):
    ls = claim.get("learners")
    return [float(x) for x in ls] if isinstance(ls, list) else []


def ours_against_learners(ax, rows, column, label, color):
    """Our figure (mean, 95% interval) against learners, one point per configuration."""
    pts = [(number(r["learners"]), number(r[f"{column}_mean"]), number(r[f"{column}_ci_low"]),
            number(r[f"{column}_ci_high"])) for r in rows]
    pts = sorted(p for p in pts if not math.isnan(p[0]) and not math.isnan(p[1]))
    if not pts:
        return 0
    x, y, lo, hi = (np.array(v) for v in zip(*pts))
    yerr = np.vstack([np.where(np.isnan(lo), 0, y - lo), np.where(np.isnan(hi), 0, hi - y)])
    ax.errorbar(x, y, yerr=yerr, color=color, marker="o", linestyle="none", capsize=3, label=label)
    return x.max()


def paper_speedup_panel(ax, claims, rows):
    max_l = max([ours_against_learners(ax, rows, "throughput_speedup", "ours: throughput", "tab:blue"),
                 ours_against_learners(ax, rows, "time_to_target_speedup", "ours: time to target", "tab:green")]
                + [max(claim_learners(c), default=1) for c in claims] + [1])
    for c in claims:
        ls = claim_learners(c)
        label = f"paper: {c.get('id', '?')}"
        if isinstance(c.get("value"), (int, float)) and ls:
            ax.plot(ls, [c["value"]] * len(ls), "r*", markersize=12, label=label)
        elif isinstance(c.get("value_range"), list) and len(c["value_range"]) == 2 and ls:
            lo, hi = c["value_range"]
            ax.vlines(ls, lo, hi, colors="red", linewidth=4, label=f"{label} ({lo:g}-{hi:g}x)")
        elif "linear" in str(c.get("value_text", "")):
            ax.plot([1, max_l], [1, max_l], color="red", linestyle="--", label=f"{label} ({c['value_text']})")
    ax.plot([1, max_l], [1, max_l], color="black", linestyle=":", linewidth=1, label="speedup = L")
    ax.set_xlabel("learners L")
    ax.set_ylabel("speedup over 1 learner")
    ax.set_title("Speedup: paper and ours")


def paper_error_panel(ax, claims, rows):
    ours_against_learners(ax, rows, "final_test_error", "ours: final test error", "tab:blue")
    for c in claims:
        ls = claim_learners(c)
        if isinstance(c.get("value"), (int, float)) and ls:
            what = f" ({c['dataset']})" if c.get("dataset") else ""
            extra = f", any n in {c['n_range'][0]}..{c['n_range'][1]}" if isinstance(c.get("n_range"), list) else ""
            ax.plot(ls, [c["value"]] * len(ls), "r*", markersize=12,
                    label=f"paper: {c.get('id', '?')}{what}{extra}")
        elif isinstance(c.get("values_by_learners"), dict):
            pts = sorted((float(k), v) for k, v in c["values_by_learners"].items() if isinstance(v, (int, float)))
            if pts:
                ax.plot(*zip(*pts), "r*--", markersize=12, label=f"paper: {c.get('id', '?')} (training error)")
    ax.set_xlabel("learners L")
    ax.set_ylabel("error")
    ax.set_title("Error: paper and ours (each on its own data set)")


def smoothed(run, window=400):
    """Training error against time, the mean over the last `window` minibatches at each update
    (an update row of nsync stands for gradients x n_sync minibatches)."""
    u = run["updates"]
    if not u or len(u["wall_s"]) == 0:
        return np.array([]), np.array([])
    per = float(run["config"].get("n_sync", 1) or 1) if run["protocol"] == "nsync" else 1.0
    t, e = np.asarray(u["wall_s"], dtype=float), np.asarray(u["train_error"], dtype=float)
    w = np.maximum(np.asarray(u["gradients"], dtype=float), 0) * per
    ok = np.isfinite(t) & np.isfinite(e) & (w > 0)
    t, e, w = t[ok], e[ok], w[ok]
    cw, ce = np.concatenate([[0], np.cumsum(w)]), np.concatenate([[0], np.cumsum(w * e)])
    lo = np.searchsorted(cw, cw[1:] - window, side="left")  # first row inside each window
    return t, (ce[1:] - ce[lo]) / np.maximum(cw[1:] - cw[lo], 1e-12)


def claim_runs(claim, runs):
    """Our runs in the setting of a claim stated per learner count (n_sync, warm or cold start)."""
    counts = {int(float(k)) for k in claim["values_by_learners"]}
    n_sync = claim.get("n_sync") if isinstance(claim.get("n_sync"), list) else None
    out = []
    for r in runs:
        c = r["config"]
        if c.get("learners") not in counts or r["status"] not in ("completed", "diverged"):
            continue
        if n_sync and r["protocol"] == "nsync" and c.get("n_sync") not in n_sync:
            continue
        if "warm_start" in claim and bool(c.get("warm_start") or c.get("warm_steps")) != bool(claim["warm_start"]):
            continue
        out.append(r)
    return out


DEFAULT_MERGE = None  # set by main() from --default-merge


def merge_of(run):
    return str(run["config"].get("merge", DEFAULT_MERGE))


def seed_band(curves, points=200):
    """The seeds' curves (time, value) on a common time grid up to the earliest end: the mean and
    its 95% interval (Student's t over the seeds; NaN with one seed)."""
    end = min(t[-1] for t, _ in curves)
    grid = np.linspace(max(t[0] for t, _ in curves), end, points)
    ys = np.array([np.interp(grid, t, e) for t, e in curves])
    mean = ys.mean(axis=0)
    if len(curves) < 2:
        return grid, mean, np.full_like(mean, np.nan), np.full_like(mean, np.nan)
    half = stats.t.ppf(0.975, len(curves) - 1) * ys.std(axis=0, ddof=1) / math.sqrt(len(curves))
    return grid, mean, mean - half, mean + half


def paper_curve_panel(ax, claims, runs):
    """Training error against time for the claim's learner counts (Paine: 1 and 8 clients), the
    paper's figures at the right edge, at "the same point of the run"."""
    claim = claims[0]
    mine = claim_runs(claim, runs)
    counts = sorted(int(float(k)) for k in claim["values_by_learners"])
    cmap = plt.get_cmap("tab10")
    styles = ["-", "--", ":", "-."]
    rules = sorted({merge_of(r) for r in mine})
    t_end = 0.0
    groups = {}  # (L, rule) -> the seeds' curves
    for r in mine:
        t, e = smoothed(r)
        if len(t):
            groups.setdefault((r["config"]["learners"], merge_of(r)), []).append((t, e))
    for (L, rule), curves in sorted(groups.items()):
        grid, mean, lo, hi = seed_band(curves)
        color = cmap(counts.index(L) % 10) if L in counts else "gray"
        label = f"ours: L={L}" + (f", merge {rule}" if L > 1 and len(rules) > 1 else "")
        label += f" (mean of {len(curves)} seeds, 95% band)" if len(curves) > 1 else " (1 seed)"
        ax.plot(grid, 100 * mean, color=color, linewidth=1.2, label=label,
                linestyle="-" if L == counts[0] else styles[rules.index(rule) % 4])
        if len(curves) > 1:
            ax.fill_between(grid, 100 * lo, 100 * hi, color=color, alpha=0.15, linewidth=0)
        t_end = max(t_end, grid[-1])
    for L in counts:
        v = claim["values_by_learners"].get(str(L))
        if isinstance(v, (int, float)):
            ax.plot([t_end or 1], [100 * v], marker="*", color=cmap(counts.index(L) % 10), markersize=14,
                    markeredgecolor="red", linestyle="none", label=f"paper: L={L} {100 * v:g}% ({claim.get('dataset', '?')})")
    if not mine:
        ax.text(0.5, 0.5, "no run of ours in this setting", transform=ax.transAxes, ha="center")
    ax.set_xlabel("training time (s; modelled where the runs are virtual)")
    ax.set_ylabel("training error, mean of the last 400 minibatches (%)")
    start = "warm" if claim.get("warm_start") else "cold" if "warm_start" in claim else ""
    ax.set_title(f"Training error against time, L = {' and '.join(map(str, counts))}"
                 + (f", {start} start" if start else "") + (f", n_sync {claim['n_sync'][0]}" if claim.get("n_sync") else ""))


def plot_paper(reference, out_dir, runs):
    """The paper's claims that state a number or a shape, beside our figures."""
    path = os.path.join(out_dir, "paper.png")
    with open(reference) as f:
        ref = json.load(f)
    claims = [c for c in ref.get("claims", []) if isinstance(c, dict)]
    speed = [c for c in claims if c.get("kind") == "speedup"]
    err = [c for c in claims if c.get("kind") in ("test_error", "train_error")
           and (isinstance(c.get("value"), (int, float)) or isinstance(c.get("values_by_learners"), dict))]
    panels = [(paper_speedup_panel, speed, read_csv(out_dir, "speedup.csv"))] if speed else []
    if err:
        panels.append((paper_error_panel, err, read_csv(out_dir, "convergence.csv")))
    curves = [c for c in err if isinstance(c.get("values_by_learners"), dict)]
    if curves:
        panels.append((paper_curve_panel, curves, runs))
    if not panels:
        empty_figure(path, "the paper states no speedup or error as a number")
        return
    fig, axes = plt.subplots(1, len(panels), figsize=(7 * len(panels), 5), squeeze=False)
    for ax, (draw, cs, rows) in zip(axes.flat, panels):
        draw(ax, cs, rows)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize="x-small")
    fig.suptitle(f"{ref.get('citation', ref.get('id', 'paper'))}: the paper's numbers (red) beside ours "
                 "(mean and 95% interval over seeds)", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv):
    global DEFAULT_MERGE
    parser = argparse.ArgumentParser(prog="plot_report.py", description=__doc__.strip().splitlines()[0])
    parser.add_argument("suite_dir")
    parser.add_argument("out_dir")
    parser.add_argument("--default-merge", required=True, help="nsync's merge rule when a run stores none")
    parser.add_argument("--reference", help="the paper's reference JSON (results/reference/)")
    args = parser.parse_args(argv[1:])
    DEFAULT_MERGE = args.default_merge
    suite_dir, out_dir, reference = args.suite_dir, args.out_dir, args.reference
    os.makedirs(out_dir, exist_ok=True)
    runs = []
    for path in sorted(glob.glob(os.path.join(suite_dir, "runs", "*.h5"))):
        try:
            runs.append(load_run(path))
        except Exception as e:  # noqa: BLE001 - a bad file must not stop the plots
            print(f"warning: {path}: {e} (skipped)", file=sys.stderr)
    plot_errors(runs, out_dir, "wall_s", "training time (s)", "error_vs_time.png")
    plot_errors(runs, out_dir, "epoch", "epochs", "error_vs_epochs.png")
    plot_speedup(out_dir)
    plot_staleness(runs, out_dir)
    if reference:
        plot_paper(reference, out_dir, runs)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
