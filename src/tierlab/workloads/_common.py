"""Helpers shared by the workload modules: parameter parsing with one-line errors,
default amounts of work, and compact field builders."""
from __future__ import annotations

import math

import numpy as np

from ..field import RateField
from ..params import parse_number
from ..units import PAGE

# ---------------------------------------------------------------------------------

DRAM_NS = 81.0  #: idle local DRAM latency (Izraelevitz et al. 2019); sizes default work
#: the most work a workload may be given (updates, ops, sweeps, iterations): 1e15
#: accesses at 1e9/s is eleven days of simulated time
MAX_WORK = 1e15
DRAM_BW = 105e9  #: DRAM read bandwidth per socket (bytes/s) used to size default work

def scaled_pages(nbytes: float, scale: float) -> int:
    """Pages covering nbytes x scale (at least one)."""
    return max(1, -(-int(round(nbytes * scale)) // PAGE))


def parse_scale(scale) -> float:
    return parse_number(scale, "scale", lo=0.0, lo_open=True)


def default_work(accesses_per_unit: float, compute_ns: float, threads: int, mlp: float,
                 seconds: float = 90.0) -> float:
    """Units of work that take about `seconds` with every page in local DRAM.

    Per thread one unit costs compute_ns + accesses x 81 ns / mlp; the total is capped by
    105 GB/s of 64-byte accesses. Rounded to 3 significant digits.
    """
    per_unit_ns = compute_ns + accesses_per_unit * DRAM_NS / max(mlp, 1e-9)
    rate = threads * 1e9 / max(per_unit_ns, 1e-9)
    if accesses_per_unit > 0:
        rate = min(rate, DRAM_BW / (accesses_per_unit * 64.0))
    w = max(seconds * rate, 1.0)
    e = 10 ** (math.floor(math.log10(w)) - 2)
    return float(round(w / e) * e)


def sum_by_key(keys, *values):
    """Sorted unique keys and the sums of each values array over equal keys."""
    keys = np.asarray(keys, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    k = keys[order]
    if len(k) == 0:
        return (k,) + tuple(np.zeros(0) for _ in values)
    first = np.concatenate(([True], k[1:] != k[:-1]))
    idx = np.flatnonzero(first)
    return (k[first],) + tuple(np.add.reduceat(np.asarray(v, dtype=np.float64)[order], idx)
                               for v in values)


def points_over_floor(npages: int, lo: int, hi: int, floor_r: float, floor_w: float,
                      pages, pr, pw, extra=None) -> RateField:
    """A field with per-page rates (pr, pw) at sorted unique `pages` inside [lo, hi) and
    rate (floor_r, floor_w) on every other page of [lo, hi). Built directly (no overlap
    resolution), so it costs O(len(pages)). `extra`: further disjoint segments
    (starts, ends, read, write) outside [lo, hi) to merge in.
    """
    pages = np.asarray(pages, dtype=np.int64)
    gs = np.concatenate(([lo], pages + 1))
    ge = np.concatenate((pages, [hi]))
    keep = ge > gs
    gs, ge = gs[keep], ge[keep]
    starts = np.concatenate((gs, pages))
    ends = np.concatenate((ge, pages + 1))
    rr = np.concatenate((np.full(len(gs), floor_r), np.broadcast_to(pr, pages.shape)))
    ww = np.concatenate((np.full(len(gs), floor_w), np.broadcast_to(pw, pages.shape)))
    if extra is not None:
        starts = np.concatenate((starts, extra[0]))
        ends = np.concatenate((ends, extra[1]))
        rr = np.concatenate((rr, extra[2]))
        ww = np.concatenate((ww, extra[3]))
    order = np.argsort(starts, kind="stable")
    starts, ends, rr, ww = starts[order], ends[order], rr[order], ww[order]
    nz = (rr > 0) | (ww > 0)
    return RateField(starts[nz], ends[nz], rr[nz], ww[nz], npages)


def common_params(threads, compute_ns, mlp, *, what: str):
    """Parse the threads / compute_ns / mlp parameters every workload takes (at most
    65,536 threads, 1 s of compute per unit of work, 1,024 misses in flight)."""
    t = parse_number(threads, f"{what} threads", lo=1, hi=65536, integer=True)
    c = parse_number(compute_ns, f"{what} compute_ns", lo=0.0, hi=1e9)
    m = parse_number(mlp, f"{what} mlp", lo=0.0, hi=1024.0, lo_open=True)
    return t, c, m
