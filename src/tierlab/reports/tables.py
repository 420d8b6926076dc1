"""Rich tables for the terminal."""
from __future__ import annotations

import math
import re

from rich.markup import escape
from rich.table import Table

from ..units import fmt_size


def _num(x, fmt="{:.3g}"):
    return "-" if x is None else fmt.format(x)


def short_name(spec: str) -> str:
    """A workload spec as tables and plots show it: a file by its name, not its path
    (trace:/long/path/x.pg,loop=2 is trace:x.pg,loop=2)."""
    return ",".join(p if "=" in p else re.sub(r"[^:]*/", "", p) for p in spec.split(","))


def scale_text(scale) -> str:
    """A miniature's scale as a reader writes it: 1/128, 0.3, 1."""
    if not scale or scale == 1:
        return "1"
    inv = 1 / scale
    return f"1/{round(inv)}" if abs(inv - round(inv)) < 1e-9 * inv else f"{scale:g}"


def throughput_header(records) -> str:
    """The throughput column's name: a miniature's throughput is its own, not the
    full-size machine's (docs/model.md), and says so."""
    scales = {r.get("scale") or 1 for r in records}
    return "throughput" if scales == {1} else \
        f"throughput at scale {', '.join(scale_text(s) for s in sorted(scales))}"


def results_table(records: list[dict], baseline: str | None = None, title: str = "") -> Table:
    """One row per run: its seed, throughput (the miniature's, at its scale), speedup
    over the baseline (same seed), share of accesses served by the slow tiers (named in
    the caption), migrations."""
    slow = {", ".join(r["slow_tiers"]) for r in records if r.get("slow_tiers")}
    t = Table(title=title or None, show_lines=False, caption_justify="left",
              caption=f"slow share: accesses served by {slow.pop()}" if len(slow) == 1
              else None)
    for col, just in (("workload", "left"), ("policy", "left"), ("alloc", "left"),
                      ("seed", "right"), (throughput_header(records), "right"),
                      (f"speedup vs {baseline}" if baseline else "speedup", "right"),
                      ("slow share", "right"), ("promoted", "right"), ("demoted", "right"),
                      ("ping-pong", "right"), ("migrated", "right"), ("sim s", "right"),
                      ("wall s", "right")):
        t.add_column(col, justify=just)
    for r in records:
        unit = r.get("work_unit", "ops")
        t.add_row(short_name(r["workload"]), r["policy"], r["alloc"], str(r["seed"]),
                  f"{r['throughput']:.3g} {unit}/s", _num(r.get("speedup"), "{:.2f}x"),
                  f"{100 * r['slow_share']:.1f}%", f"{r['promotions']:,}",
                  f"{r['demotions']:,}", f"{r['pingpong']:,}", fmt_size(r["migrated_bytes"]),
                  f"{r['sim_seconds']:.1f}", f"{r['wall_seconds']:.1f}")
    return t


def tie_notes(records: list[dict]) -> list[str]:
    """One line per workload, machine and allocation policy on which every policy served
    every access from the fastest tier: the footprint fits there, so the policies differ
    only by their overheads."""
    groups: dict = {}
    for r in records:
        groups.setdefault((r["machine"], r["workload"], r["alloc"]), []).append(r)
    notes = []
    for (m, w, a), rs in groups.items():
        fast = rs[0].get("fast_tier")
        if len({r["policy"] for r in rs}) > 1 and fast and all(
                r["tier_access_share"].get(fast, 0.0) > 1 - 1e-9 for r in rs):
            notes.append(f"note: {short_name(w)} ({fmt_size(rs[0]['footprint_bytes'])}) fits "
                         f"in {fast}, the fastest tier of {m}: under {a} every policy ties "
                         f"(all accesses there); use a larger workload or a smaller {fast}")
    return notes


def bandwidth_notes(records: list[dict], busy: float = 0.8) -> list[str]:
    """One line per workload and machine whose `static` run keeps a node at least
    `busy` utilised on average: bandwidth binds there (in a --scale miniature, copies x
    threads were scaled down until it did), so placement trades hits for bandwidth."""
    notes, seen = [], set()
    for r in records:
        util = r.get("mean_util") or {}
        hot = {n: u for n, u in util.items() if u >= busy}
        if r["policy"] == "static" and hot and (r["machine"], r["workload"]) not in seen:
            seen.add((r["machine"], r["workload"]))
            where = ", ".join(f"{n} {100 * u:.0f}%" for n, u in hot.items())
            scale = r.get("scale")
            mini = f" (miniature at scale {scale:g})" if scale and scale != 1 else ""
            notes.append(f"note: {short_name(r['workload'])} on {r['machine']}{mini} is "
                         f"bandwidth-bound: under static, mean utilisation {where}; "
                         "the oracle spreads hot pages over tiers there")
    return notes


def geomean_speedups(records: list[dict]) -> dict:
    """Geometric-mean speedup per (machine, alloc, policy) over the workloads (and
    seeds: every run counts once)."""
    groups: dict = {}
    for r in records:
        if r.get("speedup"):
            groups.setdefault((r["machine"], r["alloc"], r["policy"]), []).append(r["speedup"])
    return {k: math.exp(sum(math.log(x) for x in v) / len(v)) for k, v in groups.items()}


def verdict_table(rows: list[dict], baseline: str, title: str = "") -> Table:
    """One row per workload and policy (stats.pair_rows): seeds, mean throughput and
    geometric-mean speedup over the baseline with 95% intervals, and the verdict."""
    from .stats import ONE_SEED, TEST
    n = {len(r["seeds"]) for r in rows}
    t = Table(title=title or None, caption_justify="left",
              caption=escape(f"±, [lo, hi]: 95% interval, Student t over seeds; verdict: "
                             f"{TEST}") if n != {1} else
              f"{ONE_SEED}: --seeds 0-2 (or more) gives intervals and verdicts")
    for col in ("workload", "policy", "alloc", "seeds", throughput_header(rows),
                f"speedup vs {baseline}", "verdict"):
        t.add_column(col, justify="left" if col in ("workload", "policy", "alloc", "verdict")
                     else "right")
    for r in rows:
        t.add_row(short_name(r["workload"]), r["policy"], r["alloc"], str(len(r["seeds"])),
                  f"{r['throughput'].pm()} {r['work_unit']}/s", *speedup_cells(r, baseline))
    return t


def speedup_cells(row: dict, baseline: str) -> tuple[str, str]:
    """The speedup and verdict cells of a stats.pair_rows row (the baseline's own row
    says so)."""
    sp = row["speedup"]
    if sp is None:
        return "-", row["verdict"]
    if baseline.split(" (")[0] == row["policy"] and sp.mean == 1 and sp.lo in (None, 1):
        return "1.00x", "(baseline)"
    return sp.text("{:.2f}x"), row["verdict"]


def summary_table(records: list[dict], baseline: str) -> Table:
    """One row per policy: geometric-mean speedup over the baseline across workloads,
    with its 95% interval over seeds."""
    from .stats import geomean_rows
    t = Table(title=f"geometric-mean speedup over {baseline} across workloads",
              title_justify="left", caption_justify="left",
              caption=escape("[lo, hi]: 95% interval over seeds of the geometric mean "
                             "across workloads"))
    for col in ("machine", "alloc", "policy", "geomean speedup", "workloads", "seeds"):
        t.add_column(col, justify="right" if col.startswith("geo") else "left")
    rows = sorted(geomean_rows(records), key=lambda r: (r["machine"], r["alloc"],
                                                        -r["geomean"].mean))
    for r in rows:
        t.add_row(r["machine"], r["alloc"], r["policy"], r["geomean"].text("{:.2f}x"),
                  str(r["workloads"]), str(len(r["seeds"])))
    return t
