"""Rich tables for the terminal."""
from __future__ import annotations

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
