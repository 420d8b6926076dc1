"""The run record (its fields: README.md, "What is there") and its CSV/JSON files."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from ..units import PAGE

#: scalar columns of results.csv, in order
COLUMNS = ["machine", "workload", "policy", "alloc", "seed", "sim_seconds", "work",
           "throughput", "speedup", "slow_share", "promotions", "demotions", "pingpong",
           "migrated_bytes", "monitor_cpu_seconds", "migration_cpu_seconds",
           "app_stall_seconds", "wall_seconds"]


def make_record(sim) -> dict:
    """Everything a comparison needs about one finished run."""
    m = sim.machine
    acc = sim._acc
    tot = acc.sum()
    cache = getattr(sim, "cache", None)
    # memory mode: accesses by device (DRAM-cache hits, misses to the slow memory)
    names = list(cache.DEVICES) if cache is not None else [t.name for t in m.tiers]
    share = {n: float(acc[i] / tot) if tot else 0.0 for i, n in enumerate(names)}
    slow_tiers = [names[1]] if cache is not None else \
        [m.tiers[i].name for i in m.slow_nodes()]
    slow = sum(share[n] for n in slow_tiers)
    s = sim._series
    t = np.asarray(s["t"])
    work = np.asarray(s["work"])
    a = np.asarray(s["acc"]).reshape(len(t), -1)
    dt = np.diff(t)
    keep = dt > 0
    thr = (np.diff(work)[keep] / dt[keep]).tolist()
    da = np.diff(a, axis=0)[keep]
    dsum = da.sum(axis=1, keepdims=True)
    shares = np.divide(da, dsum, out=np.zeros_like(da), where=dsum > 0)
    st = sim.stats
    rec = {
        "machine": m.name,
        "workload": sim.workload.name,
        "policy": getattr(sim.policy, "spec", None)
        or getattr(sim.policy, "registered_name", type(sim.policy).__name__),
        "alloc": getattr(sim.alloc, "registered_name", str(sim.alloc)),
        "seed": sim.seed,
        "sim_seconds": float(sim.now),
        "work": float(sim.work),
        "work_unit": sim.workload.work_unit,
        "throughput": float(sim.work / sim.now) if sim.now > 0 else 0.0,
        "tier_access_share": share,
        # bandwidth utilisation per node (memory mode: per device) averaged over the
        # run; application stalls count as idle
        "mean_util": {n: float(u / sim.now) if sim.now > 0 else 0.0
                      for n, u in zip(names, sim._util_s)},
        "slow_share": float(slow),
        "slow_tiers": slow_tiers,
        "fast_tier": names[0] if cache is not None else m.tiers[m.demotion[0]].name,
        "promotions": int(st.promotions),
        "demotions": int(st.demotions),
        "pingpong": int(st.pingpong),
        "migrated_bytes": int(st.migrated_bytes),
        "monitor_cpu_seconds": float(st.monitor_cpu_seconds),
        "migration_cpu_seconds": float(st.migration_cpu_seconds),
        "app_stall_seconds": float(st.app_stall_seconds),
        "reclaim_pages": int(st.reclaim_pages),
        "migrations_by_reason": dict(st.by_reason),
        "footprint_bytes": int(sim.workload.footprint_pages * PAGE),
        "wall_seconds": float(sim.wall_seconds),
        "policy_stats": sim.policy.stats(),
        "series": {
            "t": t[1:][keep].tolist(),
            "throughput": thr,
            "tier_share": {n: shares[:, i].tolist() for i, n in enumerate(names)},
        },
    }
    if getattr(sim, "shadows", None) is not None:  # NOMAD's mechanisms (engine/shadow.py)
        rec["shadows"] = sim.shadows.stats()
    if cache is not None:
        rec["dram_cache"] = cache.stats(acc)
    if hasattr(sim.alloc, "stats"):
        rec["alloc_stats"] = sim.alloc.stats()
    return rec


def jsonable(x):
    """x with numpy scalars as Python numbers and dict keys as strings (for json)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, np.generic):
        return x.item()
    return x


def add_speedups(records: list[dict], baseline: str, by: str = "policy",
                 alloc: str | None = None) -> None:
    """Set `speedup` = throughput / that of the record whose `by` ("policy" or "alloc")
    is `baseline`, on the same machine, workload, seed and other of policy and alloc;
    with `alloc` (by policy), the baseline runs under that allocation policy for all."""
    keys = [k for k in ("machine", "workload", "policy", "alloc", "seed")
            if k != by and not (alloc and k == "alloc")]
    base = {tuple(r[k] for k in keys): r["throughput"] for r in records
            if r[by] == baseline and (not alloc or r["alloc"] == alloc)}
    for r in records:
        b = base.get(tuple(r[k] for k in keys))
        r["speedup"] = r["throughput"] / b if b else None


def present_traces(specs) -> list[str]:
    """The `trace:PATH[,params]` specs whose file exists (relative paths from the
    current directory: the reproductions' real-trace rows run from the repository)."""
    return [w for w in specs if Path(w[len("trace:"):].split(",")[0]).exists()]


def write_results(records: list[dict], out: Path) -> tuple[Path, Path]:
    out.mkdir(parents=True, exist_ok=True)
    jp = out / "results.json"
    jp.write_text(json.dumps(records, indent=1))
    cp = out / "results.csv"
    tiers = sorted({k for r in records for k in r["tier_access_share"]})
    with cp.open("w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(COLUMNS + [f"share_{t}" for t in tiers])
        for r in records:
            wr.writerow([r.get(c, "") for c in COLUMNS]
                        + [r["tier_access_share"].get(t, "") for t in tiers])
    return jp, cp
