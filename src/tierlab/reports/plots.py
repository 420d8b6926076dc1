"""PNG plots of a comparison: speedup bars, throughput over time, per-tier access share."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .tables import short_name  # noqa: E402


def _groups(records):
    workloads = list(dict.fromkeys(r["workload"] for r in records))
    series = list(dict.fromkeys((r["policy"], r["alloc"]) for r in records))
    return workloads, series


def _label(pol, alloc, allocs):
    return pol if len(allocs) == 1 else f"{pol} ({alloc})"


def plot_speedup(records, baseline, path: Path) -> Path:
    workloads, series = _groups(records)
    allocs = {a for _, a in series}
    bars = len(workloads) * max(1, len(series))
    fig, ax = plt.subplots(figsize=(min(14, max(6, 0.16 * bars + 2)), 4.5))
    width = 0.8 / max(len(series), 1)
    x = np.arange(len(workloads))
    for i, (pol, alloc) in enumerate(series):
        ys = []
        for w in workloads:
            rs = [r.get("speedup") or 0 for r in records
                  if r["workload"] == w and r["policy"] == pol and r["alloc"] == alloc]
            ys.append(float(np.mean(rs)) if rs else 0.0)
        ax.bar(x + (i - (len(series) - 1) / 2) * width, ys, width,
               label=_label(pol, alloc, allocs))
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(x, [short_name(w) for w in workloads], rotation=20, ha="right")
    ax.set_ylabel(f"speedup over {baseline}")
    ax.legend(fontsize=8)
    ax.set_title("Throughput relative to the baseline")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_timeseries(records, path: Path) -> Path:
    workloads, series = _groups(records)
    allocs = {a for _, a in series}
    fig, axes = plt.subplots(len(workloads), 1, figsize=(8, 2.6 * len(workloads)),
                             squeeze=False)
    for ax, w in zip(axes[:, 0], workloads):
        top = 0.0
        for r in records:
            if r["workload"] != w or r["seed"] != records[0]["seed"]:
                continue
            s = r["series"]
            ax.plot(s["t"], s["throughput"], label=_label(r["policy"], r["alloc"], allocs),
                    lw=1.2)
            top = max(top, max(s["throughput"], default=0.0))
        ax.set_title(short_name(w), fontsize=10)
        ax.set_ylabel(f"{records[0].get('work_unit', 'ops')}/s")
        ax.set_ylim(0, top * 1.1 or 1.0)
    axes[-1, 0].set_xlabel("simulated seconds")
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_tier_share(records, path: Path) -> Path:
    """Stacked per-tier access shares: one panel per workload, one bar per series."""
    workloads, series = _groups(records)
    allocs = {a for _, a in series}
    tiers = list(dict.fromkeys(t for r in records for t in r["tier_access_share"]))
    cols = min(len(workloads), 4)
    rows = -(-len(workloads) // cols)
    fig, axes = plt.subplots(rows, cols, squeeze=False, sharey=True,
                             figsize=(min(16, max(6, cols * (0.35 * len(series) + 1.2))),
                                      2.2 + 1.1 * len(series) ** 0.5 * rows))
    for ax, w in zip(axes.flat, workloads):
        labels, shares = [], []
        for pol, alloc in series:
            rs = [r for r in records if r["workload"] == w and r["policy"] == pol
                  and r["alloc"] == alloc]
            if rs:
                labels.append(_label(pol, alloc, allocs))
                shares.append([np.mean([r["tier_access_share"].get(t, 0) for r in rs])
                               for t in tiers])
        shares = np.asarray(shares).reshape(len(labels), len(tiers))
        bottom = np.zeros(len(labels))
        for j, t in enumerate(tiers):
            ax.bar(range(len(labels)), shares[:, j], bottom=bottom, label=t,
                   color=f"C{j}")
            bottom += shares[:, j]
        ax.set_xticks(range(len(labels)), labels, rotation=60, ha="right", fontsize=7)
        ax.set_ylim(0, 1)
        ax.set_title(short_name(w), fontsize=9)
    for ax in axes.flat[len(workloads):]:
        ax.axis("off")
    for ax in axes[:, 0]:
        ax.set_ylabel("share of accesses")
    axes.flat[0].legend(fontsize=7)
    fig.suptitle("Where accesses landed, per tier")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_share_over_time(records, path: Path) -> Path:
    """Share of accesses served by each tier over time, one panel per workload and
    policy (stacked areas), so promotions and demotions show as they happen."""
    workloads, series = _groups(records)
    allocs = {a for _, a in series}
    runs = [r for r in records if r["seed"] == records[0]["seed"]]
    fig, axes = plt.subplots(len(workloads), len(series), squeeze=False,
                             figsize=(3.2 * len(series) + 1, 2.2 * len(workloads)),
                             sharey=True)
    for i, w in enumerate(workloads):
        for j, (pol, alloc) in enumerate(series):
            ax = axes[i, j]
            r = next((r for r in runs if r["workload"] == w and r["policy"] == pol
                      and r["alloc"] == alloc), None)
            if r is None:
                ax.axis("off")
                continue
            s = r["series"]
            ys = [s["tier_share"][t] for t in s["tier_share"]]
            if s["t"]:
                ax.stackplot(s["t"], ys, labels=list(s["tier_share"]))
            ax.set_ylim(0, 1)
            ax.set_title(f"{short_name(w)}\n{_label(pol, alloc, allocs)}", fontsize=8)
    axes[0, -1].legend(fontsize=7, loc="lower right")
    for ax in axes[-1]:
        ax.set_xlabel("simulated s", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_all(records, baseline, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    return [plot_speedup(records, baseline, out / "speedup.png"),
            plot_timeseries(records, out / "throughput.png"),
            plot_tier_share(records, out / "tier_share.png"),
            plot_share_over_time(records, out / "tier_share_time.png")]
