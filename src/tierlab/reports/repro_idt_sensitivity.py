"""`tierlab reproduce idt --sensitivity --out DIR`: IDT's (HPDC'24) sensitivity study
(a backup slide of the paper's presentation) in the simulator.

Two grids of `idt` parameters, each cell's performance normalised to the default cell:

(a) sample interval 5/10/20/100 ms x aggregation interval 0.5/1/2/5 s (default 10 ms x
    1 s; the paper: 0.86-1.00, 10 ms x 1 s best);
(b) demote_wmark 5/10/20% x critical_wmark 0.5/1/2% (default 10% x 1%; the paper:
    0.84-1.00, demote_wmark 10% best, every cell within about 16% of the best).

Every cell's spec names all four parameters (`idt:sample=5ms,aggr=2s,demote_wmark=10%,
critical_wmark=1%`), so the default cell is one configuration shared by both grids and
does not depend on `idt`'s own defaults. A cell's performance on a workload is its
throughput over the default cell's on that workload; its performance is the geometric
mean of those over the workloads (so the default cell is exactly 1). Machine
`optane-4tier` (as `reproduce idt`), at the `@baselines` suite's scale (1/64) unless
`scale` says otherwise. Output: README.md (both tables, best cell in bold, the span next
to the paper's), results.json (the grids and every run record), results.csv (one row per
cell and workload, and a `geomean` row per cell) and a heat map per grid.
"""
from __future__ import annotations

import csv
import json
import math
import time
from pathlib import Path

from .. import api
from ..errors import TierlabError
from .stats import over_seeds, seeds_footer

SENS_MACHINE = "optane-4tier"
#: the suite's scale, as `reproduce idt` runs it
SENS_SCALE = api.SUITE_SCALE["baselines"]
#: three representative workloads of @baselines (a hot set, a KV store with inserts, a
#: phased masim): 24 cells x 3 = 72 runs; `--workloads` overrides. The moving hot set
#: (gups:dynamic) is left out by default: one IDT run of it simulates ~1,400 s, 70% of a
#: cell's cost
SENS_WORKLOADS = ["gups:hotset", "ycsb:d", "masim:tiering"]

SAMPLES = ["5ms", "10ms", "20ms", "100ms"]
AGGRS = ["0.5s", "1s", "2s", "5s"]
DEMOTE_WMARKS = ["5%", "10%", "20%"]
CRITICAL_WMARKS = ["0.5%", "1%", "2%"]
#: the default cell: (sample, aggr, demote_wmark, critical_wmark)
DEFAULT = ("10ms", "1s", "10%", "1%")


def cell_spec(sample: str, aggr: str, demote: str, critical: str) -> str:
    return (f"idt:sample={sample},aggr={aggr},demote_wmark={demote},"
            f"critical_wmark={critical}")


def grids(samples=SAMPLES, aggrs=AGGRS, demotes=DEMOTE_WMARKS, criticals=CRITICAL_WMARKS,
          default=DEFAULT) -> list[dict]:
    """The two grids: name, title, row and column parameter and values, and the spec of
    each cell {(row value, column value): spec}."""
    s0, a0, d0, c0 = default
    for vals, v, what in ((samples, s0, "sample"), (aggrs, a0, "aggr"),
                          (demotes, d0, "demote_wmark"), (criticals, c0, "critical_wmark")):
        if v not in vals:
            raise TierlabError(f"sensitivity grid: the default {what} {v} must be among "
                               f"the grid's values ({', '.join(vals)})")
    return [
        dict(name="intervals", title="sample interval x aggregation interval",
             row="sample", col="aggr", rows=list(samples), cols=list(aggrs),
             default=(s0, a0), paper=(0.86, 1.00), paper_best="10 ms x 1 s",
             paper_gap="14% (span 0.86-1.00)",
             cells={(s, a): cell_spec(s, a, d0, c0) for s in samples for a in aggrs}),
        dict(name="wmarks", title="demote_wmark x critical_wmark",
             row="demote_wmark", col="critical_wmark", rows=list(demotes),
             cols=list(criticals), default=(d0, c0), paper=(0.84, 1.00),
             paper_best="demote_wmark 10%", paper_gap="about 16%",
             cells={(d, c): cell_spec(s0, a0, d, c) for d in demotes for c in criticals}),
    ]


def policies(gs: list[dict]) -> list[str]:
    """Every distinct cell spec (the default cell once), in grid order."""
    return list(dict.fromkeys(p for g in gs for p in g["cells"].values()))


def count_runs(workloads: list[str] | None, **grid) -> int:
    """How many runs `reproduce_idt_sensitivity` makes (for a progress bar's total)."""
    wls = api.expand_suites(list(workloads or SENS_WORKLOADS))
    return len(policies(grids(**grid))) * len(wls)


def _geo(xs) -> float:
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def normalise(recs: list[dict], gs: list[dict]) -> None:
    """Fill each grid's `norm` {cell: {workload: throughput / default's}} and `perf`
    {cell: geomean over the workloads} from the run records."""
    thr = {(r["workload"], r["policy"]): r["throughput"] for r in recs}
    wls = list(dict.fromkeys(r["workload"] for r in recs))
    for g in gs:
        base = g["cells"][g["default"]]
        g["norm"], g["perf"] = {}, {}
        for cell, spec in g["cells"].items():
            per = {}
            for w in wls:
                b, x = thr.get((w, base)), thr.get((w, spec))
                per[w] = x / b if b and x is not None else None
            g["norm"][cell] = per
            g["perf"][cell] = _geo(per.values())


def reproduce_idt_sensitivity(out: Path, scale: float | None = None,
                              workloads: list[str] | None = None, jobs: int | None = None,
                              on_done=None, samples=SAMPLES, aggrs=AGGRS,
                              demotes=DEMOTE_WMARKS, criticals=CRITICAL_WMARKS,
                              machine: str = SENS_MACHINE) -> Path:
    """Run both grids on every workload and write README.md, results.json, results.csv,
    idt-sensitivity-intervals.png and idt-sensitivity-wmarks.png into `out`.
    `workloads`: None or empty for SENS_WORKLOADS; `scale`: None for SENS_SCALE. The
    grids' values are parameters (the default cell DEFAULT must be among them)."""
    t_wall = time.perf_counter()
    gs = grids(samples, aggrs, demotes, criticals)
    scale = SENS_SCALE if scale is None else scale
    wls = api.expand_suites(list(workloads or SENS_WORKLOADS))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    recs = api.compare([machine], wls, policies(gs), scale=scale,
                       baseline=gs[0]["cells"][gs[0]["default"]], jobs=jobs,
                       on_done=on_done)
    recs = over_seeds(recs)  # one record per cell: geometric means over the seeds
    normalise(recs, gs)
    wall = time.perf_counter() - t_wall
    _write_json(out / "results.json", gs, recs, machine, scale, wls, wall)
    _write_csv(out / "results.csv", gs, recs, wls)
    for g in gs:
        _heatmap(g, out / f"idt-sensitivity-{g['name']}.png")
    path = out / "README.md"
    # no report.html: its records are one per cell, over the seeds
    path.write_text(_readme(gs, recs, machine, scale, wls)
                    + seeds_footer(recs, report_html=False))
    return path


# -- outputs -------------------------------------------------------------------------
def _span(g) -> tuple[float, float]:
    v = [x for x in g["perf"].values() if math.isfinite(x)]
    return (min(v), max(v)) if v else (float("nan"), float("nan"))


def _best(g):
    v = {c: x for c, x in g["perf"].items() if math.isfinite(x)}
    return max(v, key=v.get) if v else None


def _write_json(path: Path, gs, recs, machine, scale, wls, wall) -> None:
    doc = {"machine": machine, "scale": scale, "workloads": wls,
           "default": dict(zip(("sample", "aggr", "demote_wmark", "critical_wmark"),
                               DEFAULT)),
           "wall_seconds": wall, "grids": [], "records": recs}
    for g in gs:
        lo, hi = _span(g)
        doc["grids"].append({
            "name": g["name"], "row": g["row"], "col": g["col"], "rows": g["rows"],
            "cols": g["cols"], "default": list(g["default"]),
            "best": list(_best(g) or ()), "span": [lo, hi], "paper_span": list(g["paper"]),
            "cells": [{g["row"]: r, g["col"]: c, "policy": g["cells"][(r, c)],
                       "performance": _nan_none(g["perf"][(r, c)]),
                       "per_workload": g["norm"][(r, c)]}
                      for r in g["rows"] for c in g["cols"]]})
    path.write_text(json.dumps(doc, indent=1))


def _nan_none(x):
    return None if x is None or not math.isfinite(x) else x


def _write_csv(path: Path, gs, recs, wls) -> None:
    by = {(r["workload"], r["policy"]): r for r in recs}
    with path.open("w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["grid", "row_param", "row", "col_param", "col", "default", "workload",
                     "policy", "throughput", "normalised", "slow_share", "promotions",
                     "demotions", "wall_seconds"])
        for g in gs:
            for r in g["rows"]:
                for c in g["cols"]:
                    spec = g["cells"][(r, c)]
                    head = [g["name"], g["row"], r, g["col"], c,
                            int((r, c) == g["default"])]
                    for w in wls:
                        rec = by.get((w, spec), {})
                        n = g["norm"][(r, c)].get(w)
                        wr.writerow(head + [w, spec, rec.get("throughput", ""),
                                            "" if n is None else f"{n:.6g}",
                                            rec.get("slow_share", ""),
                                            rec.get("promotions", ""),
                                            rec.get("demotions", ""),
                                            rec.get("wall_seconds", "")])
                    p = g["perf"][(r, c)]
                    wr.writerow(head + ["geomean", spec, "",
                                        f"{p:.6g}" if math.isfinite(p) else "",
                                        "", "", "", ""])


def _fmt_cell(x: float, bold: bool) -> str:
    t = "-" if not math.isfinite(x) else f"{x:.2f}"
    return f"**{t}**" if bold and t != "-" else t


def md_grid(g) -> str:
    """Rows x columns of the grid, cells = normalised performance, the best cell in bold
    (and any that print the same), the default cell marked with a dagger."""
    best = _best(g)
    top = _fmt_cell(g["perf"][best], False) if best is not None else None
    out = [f"| {g['row']} \\ {g['col']} | " + " | ".join(g["cols"]) + " |",
           "|---|" + "---:|" * len(g["cols"])]
    for r in g["rows"]:
        cells = []
        for c in g["cols"]:
            t = _fmt_cell(g["perf"][(r, c)], _fmt_cell(g["perf"][(r, c)], False) == top)
            cells.append(t + (" †" if (r, c) == g["default"] else ""))
        out.append(f"| {r} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def md_workloads(g, wls) -> str:
    """Per workload: its best and worst cell and span (the CSV has every cell)."""
    out = ["| workload | best cell | worst cell | span |", "|---|---|---|---|"]
    for w in wls:
        v = {c: n[w] for c, n in g["norm"].items() if n.get(w) is not None}
        if not v:
            out.append(f"| {w} | - | - | - |")
            continue
        hi, lo = max(v, key=v.get), min(v, key=v.get)
        out.append(f"| {w} | {hi[0]} x {hi[1]} ({v[hi]:.2f}) | {lo[0]} x {lo[1]} "
                   f"({v[lo]:.2f}) | {v[lo]:.2f}-{v[hi]:.2f} |")
    return "\n".join(out)


def _readme(gs, recs, machine, scale, wls) -> str:
    ga, gb = gs
    nruns = sum(len(r.get("seeds", [r.get("seed")])) for r in recs)
    sections = []
    for g, label in ((ga, "(a)"), (gb, "(b)")):
        lo, hi = _span(g)
        best = _best(g)
        worst_gap = 1 - lo / hi if hi and math.isfinite(lo) else float("nan")
        best_txt = "-" if best is None else f"{g['row']} {best[0]} x {g['col']} {best[1]}"
        default_best = "is" if best == g["default"] else "is not"
        sections.append(f"""## {label} {g['title']}

Rows: {g['row']}; columns: {g['col']}; cells: geomean over the workloads of throughput
over the default cell's (†, {g['default'][0]} x {g['default'][1]}); best cell in bold.

{md_grid(g)}

| | paper | tierlab |
|---|---|---|
| span (min-max) | {g['paper'][0]:.2f}-{g['paper'][1]:.2f} | {lo:.2f}-{hi:.2f} |
| best cell | {g['paper_best']} | {best_txt} |
| worst cell below the best | {g['paper_gap']} | {100 * worst_gap:.0f}% |

The default cell {default_best} the best here.

![{g['title']}](idt-sensitivity-{g['name']}.png)

Per workload (normalised to the default cell on that workload):

{md_workloads(g, wls)}
""")
    default_wls = list(wls) == SENS_WORKLOADS
    which = ("the default set, three representative workloads of the `@baselines` suite "
             "(`--workloads` overrides it; `--workloads @baselines` alone still means "
             "this default, list the suite's eight names for all of them)"
             if default_wls else "given with `--workloads`")
    return f"""# IDT (HPDC'24) sensitivity study reproduced in tierlab

The paper's backup slide: IDT's performance as its monitoring intervals and its
watermarks change, normalised to the default configuration (sample interval 10 ms,
aggregation interval 1 s, demote_wmark 10%, critical_wmark 1%).

Here: `idt` on `{machine}` at scale {_scale_txt(scale)}; workloads
{", ".join(f"`{w}`" for w in wls)} ({which}). Every cell's policy spec names all four
parameters, e.g. `{cell_spec("5ms", "2s", *DEFAULT[2:])}`; the default cell is
one run shared by both grids. A cell's performance = geometric mean over the workloads
of its throughput / the default cell's throughput on the same workload, a throughput
being the geometric mean over the seeds: {len(recs)} runs a seed, {nruns} in all.
Records: `results.json` (grids and run records), `results.csv` (every cell on every
workload, and a `geomean` row per cell).

{chr(10).join(sections)}
Command: `tierlab reproduce idt --sensitivity --out DIR` (`--scale`, `--workloads`,
`--jobs` as for `reproduce idt`).
"""


def _scale_txt(scale: float) -> str:
    inv = 1 / scale
    return f"1/{round(inv)}" if scale < 1 and abs(inv - round(inv)) < 1e-9 else f"{scale:g}"


def _heatmap(g, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.patches import Rectangle
    m = np.array([[g["perf"][(r, c)] for c in g["cols"]] for r in g["rows"]], float)
    best = _best(g)
    top = f"{g['perf'][best]:.2f}" if best is not None else None
    fig, ax = plt.subplots(figsize=(1.1 * len(g["cols"]) + 2.6,
                                    0.8 * len(g["rows"]) + 1.8))
    fin = m[np.isfinite(m)]
    lo = float(fin.min()) if fin.size else 0.0
    hi = float(fin.max()) if fin.size else 1.0
    if hi - lo < 1e-9:
        lo, hi = lo - 0.05, hi + 0.05
    im = ax.imshow(m, cmap="viridis", vmin=lo, vmax=hi, aspect="auto")
    for i, r in enumerate(g["rows"]):
        for j, c in enumerate(g["cols"]):
            x = m[i, j]
            if not np.isfinite(x):
                continue
            dark = (x - lo) / (hi - lo) < 0.55
            ax.text(j, i, f"{x:.2f}", ha="center", va="center", fontsize=9,
                    color="white" if dark else "black",
                    fontweight="bold" if f"{x:.2f}" == top else "normal")
            if (r, c) == g["default"]:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, lw=2,
                                       ec="red"))
    ax.set_xticks(range(len(g["cols"])), g["cols"])
    ax.set_yticks(range(len(g["rows"])), g["rows"])
    ax.set_xlabel(g["col"])
    ax.set_ylabel(g["row"])
    lo_s, hi_s = _span(g)
    ax.set_title(f"IDT: {g['title']}\nspan {lo_s:.2f}-{hi_s:.2f} "
                 f"(paper {g['paper'][0]:.2f}-{g['paper'][1]:.2f}); red: default",
                 fontsize=9)
    cb = fig.colorbar(im, ax=ax)
    cb.set_label("performance / default cell")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
