"""Recorded programs as capacity-bound and bandwidth-bound miniatures (traces with
`copies=` so the footprint is about twice DRAM, where capacity binds and where bandwidth
binds at `--scale 1/128`). Used by benchmarks/bench_idt_traces.py
and `tierlab reproduce beyond`.

Each trace runs as `trace:PATH,copies=K` on `optane-4tier:dram=X,optane=Y` (path dram0 ->
dram1 -> optane0 -> optane1), X chosen so the footprint (K copies of the trace's touched
pages) is about twice the DRAM of both nodes together, each Optane node large enough to
hold all of it:
- capacity: `--scale 1`, copies = K (default 8);
- bandwidth: `--scale 1/128`, copies = 128 x K and every capacity 128x larger (the
  miniature lays out K copies and runs 128 x K x 1/128 threads against 1/128 of the
  bandwidth; workloads/trace.py).
"""
from __future__ import annotations

import math
import os
from pathlib import Path

REGIMES = {"capacity": 1.0, "bandwidth": 1 / 128}
BW_FACTOR = 128  #: copies and capacities at full scale, x this, in the bandwidth regime
MiB = 2**20


def footprint_bytes(path: Path) -> int:
    """Touched pages x 4 KiB (what `tierlab trace info` calls the footprint)."""
    from ..units import PAGE
    from ..workloads.trace import read_trace
    return int(len(read_trace(path).touched_pages())) * PAGE


def fmt_mib(m: int) -> str:
    return f"{m // 1024}GiB" if m % 1024 == 0 else f"{m}MiB"


def setup(path: Path, fp: int, regime: str, copies: int = 8, root: Path | None = None) -> dict:
    """Machine, workload spec, scale and copies of one (trace, regime); the trace's
    path is written relative to `root` (the runs' working directory) when given."""
    total = copies * fp  # full-scale footprint of the capacity regime
    dram = max(1, round(total / 4 / MiB))  # MiB per DRAM node: 2 nodes = half the footprint
    optane = max(512, 2 ** math.ceil(math.log2(max(1, total / MiB))))  # MiB per Optane node
    k = copies
    if regime == "bandwidth":
        k, dram, optane = copies * BW_FACTOR, dram * BW_FACTOR, optane * BW_FACTOR
    p = os.path.relpath(os.path.abspath(path), root) if root is not None else str(path)
    return {"machine": f"optane-4tier:dram={dram}MiB,optane={fmt_mib(optane)}",
            "workload": f"trace:{p},copies={k}", "scale": REGIMES[regime], "copies": k}
