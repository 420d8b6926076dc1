"""PNG plots of a comparison: speedup bars with 95% intervals, throughput over time,
per-tier access share, and that share over time.

Every figure has one row of panels per machine, a title naming the machine, the scale
(a miniature's throughput is its own, docs/model.md) and the seeds; each policy keeps
one colour and marker in every figure (20 colours x 4 markers before any repeats);
legends sit outside the data; a panel's unit is its workload's work unit.
"""
from __future__ import annotations

import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .stats import pair_rows  # noqa: E402
from .tables import scale_text, short_name  # noqa: E402

_COLOURS = [plt.get_cmap("tab20")(i) for i in (0, 2, 4, 6, 8, 10, 12, 14, 16, 18,
                                               1, 3, 5, 7, 9, 11, 13, 15, 17, 19)]
_MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
#: panels per row before a figure wraps, and series per tier-share-over-time figure
MAX_COLS = 4


def _series(records) -> list[tuple[str, str]]:
    return list(dict.fromkeys((r["policy"], r["alloc"]) for r in records))


def _style(i: int) -> dict:
    """Colour and marker of the i-th series: distinct for the first 80."""
    return {"color": _COLOURS[i % 20], "marker": _MARKERS[(i // 20) % len(_MARKERS)]}


def _label(pol, alloc, allocs):
    return pol if len(allocs) == 1 else f"{pol} ({alloc})"


def _machines(records) -> list[str]:
    return list(dict.fromkeys(r["machine"] for r in records))


def _row_title(records, machine: str) -> str:
    rs = [r for r in records if r["machine"] == machine]
    seeds = sorted({r["seed"] for r in rs})
    scales = sorted({r.get("scale") or 1 for r in rs})
    s = ", ".join(scale_text(x) for x in scales)
    return (f"{machine}, scale {s}, {len(seeds)} seed{'s' * (len(seeds) > 1)}"
            + ("" if len(seeds) > 1 else f" ({seeds[0]})"))


def _save(fig, path: Path, legend_handles=None, legend_title=None) -> Path:
    if legend_handles:
        fig.legend(*zip(*legend_handles), loc="upper left", bbox_to_anchor=(1.0, 0.98),
                   fontsize=8, title=legend_title, frameon=False)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9.]+", "-", short_name(text)).strip("-")[:60]


def plot_speedup(records, baseline, path: Path) -> Path:
    """Geometric-mean speedup over the baseline per workload and policy, one row per
    machine, with the 95% interval over seeds as error bars."""
    series = _series(records)
    allocs = {a for _, a in series}
    machines = _machines(records)
    rows = pair_rows(records)
    nwl = max(len({r["workload"] for r in records if r["machine"] == m}) for m in machines)
    width_in = min(16, max(6, 0.18 * nwl * len(series) + 2))
    fig, axes = plt.subplots(len(machines), 1, squeeze=False,
                             figsize=(width_in, 3.6 * len(machines)))
    handles = {}
    for ax, m in zip(axes[:, 0], machines):
        wls = list(dict.fromkeys(r["workload"] for r in records if r["machine"] == m))
        width = 0.8 / max(len(series), 1)
        x = np.arange(len(wls))
        for i, (pol, alloc) in enumerate(series):
            est = {r["workload"]: r["speedup"] for r in rows
                   if r["machine"] == m and r["policy"] == pol and r["alloc"] == alloc}
            ys = [est[w].mean if est.get(w) else np.nan for w in wls]
            lo = [est[w].mean - est[w].lo if est.get(w) and est[w].lo is not None else 0
                  for w in wls]
            hi = [est[w].hi - est[w].mean if est.get(w) and est[w].hi is not None else 0
                  for w in wls]
            st = _style(i)
            b = ax.bar(x + (i - (len(series) - 1) / 2) * width, ys, width, color=st["color"],
                       yerr=[lo, hi], error_kw={"elinewidth": 0.8, "capsize": 1.5})
            handles[_label(pol, alloc, allocs)] = b
        ax.axhline(1.0, color="k", lw=0.8)
        ax.set_xticks(x, [short_name(w) for w in wls], rotation=20, ha="right")
        ax.set_ylabel(f"speedup over {baseline}")
        several = len({r["seed"] for r in records if r["machine"] == m}) > 1
        ax.set_title(_row_title(records, m) + (": geometric mean, 95% interval over seeds"
                                               if several else ": no interval"), fontsize=10)
    fig.tight_layout()
    return _save(fig, path, [(h, k) for k, h in handles.items()], "policy")


def _grid(records, per_machine):
    """One row of panels per machine (wrapped at MAX_COLS); per_machine(m) lists its
    panels' keys."""
    machines = _machines(records)
    keys = {m: per_machine(m) for m in machines}
    cols = min(MAX_COLS, max(len(k) for k in keys.values()))
    layout = []  # (machine, key, row, col)
    row = 0
    for m in machines:
        for j, k in enumerate(keys[m]):
            layout.append((m, k, row + j // cols, j % cols))
        row += -(-len(keys[m]) // cols)
    return layout, row, cols


def plot_timeseries(records, path: Path) -> Path:
    """Throughput over simulated time of each policy's run with the lowest seed, one
    panel per machine and workload, in the workload's unit."""
    series = _series(records)
    allocs = {a for _, a in series}
    layout, nrows, ncols = _grid(records, lambda m: list(dict.fromkeys(
        r["workload"] for r in records if r["machine"] == m)))
    fig, axes = plt.subplots(nrows, ncols, squeeze=False, figsize=(4.2 * ncols, 2.7 * nrows))
    used, handles = set(), {}
    for m, w, i, j in layout:
        ax = axes[i, j]
        used.add((i, j))
        rs = [r for r in records if r["machine"] == m and r["workload"] == w]
        seed = min(r["seed"] for r in rs)
        top = 0.0
        for k, (pol, alloc) in enumerate(series):
            r = next((r for r in rs if r["policy"] == pol and r["alloc"] == alloc
                      and r["seed"] == seed), None)
            if r is None:
                continue
            s = r["series"]
            st = _style(k)
            (ln,) = ax.plot(s["t"], s["throughput"], lw=1.1, color=st["color"],
                            marker=st["marker"], markevery=max(1, len(s["t"]) // 6),
                            markersize=3.5)
            handles[_label(pol, alloc, allocs)] = ln
            top = max(top, max(s["throughput"], default=0.0))
        ax.set_ylim(0, top * 1.1 or 1.0)
        ax.set_ylabel(f"{rs[0].get('work_unit', 'ops')}/s", fontsize=8)
        ax.set_xlabel("simulated s", fontsize=8)
        ax.set_title(f"{short_name(w)}\n{m}, scale {scale_text(rs[0].get('scale'))}, "
                     f"seed {seed}", fontsize=8)
    for (i, j), ax in np.ndenumerate(axes):
        if (i, j) not in used:
            ax.axis("off")
    fig.suptitle("Throughput over time (a miniature's throughput is its own)", fontsize=10)
    fig.tight_layout()
    return _save(fig, path, [(h, k) for k, h in handles.items()], "policy")


def plot_tier_share(records, path: Path) -> Path:
    """Stacked per-tier access shares (mean over seeds): one panel per machine and
    workload, one bar per policy; each machine's own tiers."""
    series = _series(records)
    allocs = {a for _, a in series}
    layout, nrows, ncols = _grid(records, lambda m: list(dict.fromkeys(
        r["workload"] for r in records if r["machine"] == m)))
    fig, axes = plt.subplots(nrows, ncols, squeeze=False,
                             figsize=(min(18, ncols * (0.32 * len(series) + 1.6)),
                                      3.3 * nrows))
    used, handles = set(), {}
    for m, w, i, j in layout:
        ax = axes[i, j]
        used.add((i, j))
        rs = [r for r in records if r["machine"] == m and r["workload"] == w]
        tiers = list(dict.fromkeys(t for r in rs for t in r["tier_access_share"]))
        labels, shares = [], []
        for pol, alloc in series:
            sel = [r for r in rs if r["policy"] == pol and r["alloc"] == alloc]
            if sel:
                labels.append(_label(pol, alloc, allocs))
                shares.append([np.mean([r["tier_access_share"].get(t, 0) for r in sel])
                               for t in tiers])
        shares = np.asarray(shares).reshape(len(labels), len(tiers))
        bottom = np.zeros(len(labels))
        for k, t in enumerate(tiers):
            b = ax.bar(range(len(labels)), shares[:, k], bottom=bottom,
                       color=plt.get_cmap("Set2")(k % 8))
            handles[t] = b
            bottom += shares[:, k]
        ax.set_xticks(range(len(labels)), labels, rotation=60, ha="right", fontsize=7)
        ax.set_ylim(0, 1)
        ax.set_ylabel("share of accesses", fontsize=8)
        ax.set_title(f"{short_name(w)}\n{_row_title(records, m)}", fontsize=8)
    for (i, j), ax in np.ndenumerate(axes):
        if (i, j) not in used:
            ax.axis("off")
    fig.suptitle("Where accesses landed, per tier (mean over seeds)", fontsize=10)
    fig.tight_layout()
    return _save(fig, path, [(h, k) for k, h in handles.items()], "tier")


def plot_share_over_time(records, out: Path) -> list[Path]:
    """Share of accesses served by each tier over time (stacked areas), one figure per
    machine and workload with a panel per policy (lowest seed), so promotions and
    demotions show as they happen and a large sweep stays readable."""
    series = _series(records)
    allocs = {a for _, a in series}
    pairs = list(dict.fromkeys((r["machine"], r["workload"]) for r in records))
    paths = []
    for m, w in pairs:
        rs = [r for r in records if r["machine"] == m and r["workload"] == w]
        seed = min(r["seed"] for r in rs)
        runs = [(k, next((r for r in rs if r["policy"] == p and r["alloc"] == a
                          and r["seed"] == seed), None)) for k, (p, a) in enumerate(series)]
        runs = [(k, r) for k, r in runs if r is not None]
        cols = min(MAX_COLS, len(runs))
        nrows = -(-len(runs) // cols)
        fig, axes = plt.subplots(nrows, cols, squeeze=False, sharey=True,
                                 figsize=(3.3 * cols, 2.4 * nrows))
        handles = {}
        for ax, (k, r) in zip(axes.flat, runs):
            s = r["series"]
            names = list(s["tier_share"])
            if s["t"]:
                polys = ax.stackplot(s["t"], [s["tier_share"][t] for t in names],
                                     colors=[plt.get_cmap("Set2")(i % 8)
                                             for i in range(len(names))])
                handles.update(zip(names, polys))
            ax.set_ylim(0, 1)
            ax.set_title(_label(r["policy"], r["alloc"], allocs), fontsize=9,
                         color=_style(k)["color"])
            ax.set_xlabel("simulated s", fontsize=8)
        for ax in axes.flat[len(runs):]:
            ax.axis("off")
        fig.suptitle(f"Share of accesses per tier over time: {short_name(w)} on {m}, scale "
                     f"{scale_text(rs[0].get('scale'))}, seed {seed}", fontsize=10)
        fig.tight_layout()
        name = "tier_share_time.png" if len(pairs) == 1 else \
            f"tier_share_time-{_slug(m)}-{_slug(w)}.png"
        paths.append(_save(fig, out / name, [(h, k) for k, h in handles.items()], "tier"))
    return paths


def plot_all(records, baseline, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    return [plot_speedup(records, baseline, out / "speedup.png"),
            plot_timeseries(records, out / "throughput.png"),
            plot_tier_share(records, out / "tier_share.png"),
            *plot_share_over_time(records, out)]
