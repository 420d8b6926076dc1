"""Rich tables for the terminal."""
from __future__ import annotations

import math

from rich.table import Table

from ..units import fmt_size


def _num(x, fmt="{:.3g}"):
    return "-" if x is None else fmt.format(x)


def results_table(records: list[dict], baseline: str | None = None, title: str = "") -> Table:
    """One row per run: throughput, speedup over the baseline, slow-tier share, migrations."""
    t = Table(title=title or None, show_lines=False)
    for col, just in (("workload", "left"), ("policy", "left"), ("alloc", "left"),
                      ("throughput", "right"), (f"speedup vs {baseline}" if baseline
                                                else "speedup", "right"),
                      ("slow share", "right"), ("promoted", "right"), ("demoted", "right"),
                      ("ping-pong", "right"), ("migrated", "right"), ("sim s", "right"),
                      ("wall s", "right")):
        t.add_column(col, justify=just)
    for r in records:
        unit = r.get("work_unit", "ops")
        t.add_row(r["workload"], r["policy"], r["alloc"],
                  f"{r['throughput']:.3g} {unit}/s", _num(r.get("speedup"), "{:.2f}x"),
                  f"{100 * r['slow_share']:.1f}%", f"{r['promotions']:,}",
                  f"{r['demotions']:,}", f"{r['pingpong']:,}", fmt_size(r["migrated_bytes"]),
                  f"{r['sim_seconds']:.1f}", f"{r['wall_seconds']:.1f}")
    return t


def geomean_speedups(records: list[dict]) -> dict:
    """Geometric-mean speedup per (machine, alloc, policy) over the workloads."""
    groups: dict = {}
    for r in records:
        if r.get("speedup"):
            groups.setdefault((r["machine"], r["alloc"], r["policy"]), []).append(r["speedup"])
    return {k: math.exp(sum(math.log(x) for x in v) / len(v)) for k, v in groups.items()}


def summary_table(records: list[dict], baseline: str) -> Table:
    """One row per policy: geometric-mean speedup over the baseline across workloads."""
    gm = geomean_speedups(records)
    t = Table(title=f"geometric-mean speedup over {baseline}", title_justify="left")
    for col in ("machine", "alloc", "policy", "geomean speedup", "workloads"):
        t.add_column(col, justify="right" if col.startswith("geo") else "left")
    n = {}
    for r in records:
        n[(r["machine"], r["alloc"], r["policy"])] = n.get((r["machine"], r["alloc"],
                                                           r["policy"]), 0) + 1
    for (m, a, p), v in sorted(gm.items(), key=lambda kv: (kv[0][0], kv[0][1], -kv[1])):
        t.add_row(m, a, p, f"{v:.2f}x", str(n[(m, a, p)]))
    return t
