"""stream: sequential sweeps over large arrays (STREAM triad, NAS MG/CG-like streaming).

Work unit: one *element* (8 bytes) of the kernel, e.g. one ``a[i] = b[i] + s * c[i]``.
With ``arrays`` = k the last k-1 arrays are read and the first is written (k = 3 is the
STREAM triad, k = 2 copy, k = 1 an in-place update that reads and writes the one
array). Accesses are cache lines of 64 B, so one element costs (k-1)/8 reads and 1/8
write (k = 1: 1/8 read + 1/8 write): rates per element sum to k/8 (1/4 for k = 1).
Every array gets a uniform field (a sweep visits every page equally often; within a
short monitoring interval a real sweep touches only a window, which this model does
not show). Johnny Cache found caching worse than migration for such streaming sets
larger than the cache (OSDI'23: NAS MG and CG).

Allocation: arrays in order (a, b, c, ...), each in address order, at work 0.

Defaults: ``size`` 48 GiB in total (three 16 GiB arrays: larger than the 32 GiB DRAM of
the built-in machines), 16 threads, memory-level parallelism 16 (hardware prefetch of
sequential streams), 0.5 ns of compute per element. ``sweeps`` (passes over all
elements) defaults to what fills ~90 simulated seconds at DRAM bandwidth (105 GB/s,
which binds here), about 180 at scale 1.
"""
from __future__ import annotations

import numpy as np

from ..field import RateField
from ..params import parse_bytes, parse_number
from ..units import PAGE, fmt_size
from .base import WORKLOADS, Change, Workload
from ._common import MAX_WORK, common_params, default_work, parse_scale


@WORKLOADS.register("stream")
class Stream(Workload):
    """Sequential sweeps over k arrays (STREAM triad by default, NAS MG-like)."""

    #: cyclic sweeps, not Poisson accesses: a direct-mapped cache slot shared by two
    #: swept pages misses every time (engine/dram_cache.py)
    sweep = True

    def __init__(self, size="48GiB", arrays=3, sweeps=None, threads=16, compute_ns=0.5,
                 mlp=16.0, scale=1.0, seed=0):
        super().__init__()
        scale = parse_scale(scale)
        self.threads, self.compute_ns, self.mlp = common_params(threads, compute_ns, mlp,
                                                                what="stream")
        k = parse_number(arrays, "stream arrays", lo=1, hi=64, integer=True)
        total = parse_bytes(size, "stream size", minimum=k * PAGE)
        per = max(1, -(-int(round(total * scale / k)) // PAGE))  # pages per array
        self.name = "stream"
        self.work_unit = "elements"
        self.arrays = k
        self.array_pages = per
        self.npages = self.footprint_pages = k * per
        self.elements = per * PAGE // 8  # elements per array = per sweep
        reads = (k - 1) / 8.0 if k > 1 else 1 / 8.0
        writes = 1 / 8.0
        self.reads_per_unit, self.writes_per_unit = reads, writes
        if sweeps is None:
            w = default_work(reads + writes, self.compute_ns, self.threads, self.mlp)
            self.sweeps = max(1.0, round(w / (self.elements / scale)))
        else:
            self.sweeps = parse_number(sweeps, "stream sweeps", lo=0.0, hi=MAX_WORK,
                                       lo_open=True)
        self.total_work = float(self.sweeps * self.elements)
        self.params = {"size": fmt_size(self.npages * PAGE), "arrays": k,
                       "sweeps": self.sweeps, "threads": self.threads}

    def field(self) -> RateField:
        k, per = self.arrays, self.array_pages
        starts = np.arange(k, dtype=np.int64) * per
        ends = starts + per
        rd = np.full(k, (1 / 8.0) / per)
        wr = np.zeros(k)
        wr[0] = (1 / 8.0) / per
        if k > 1:
            rd[0] = 0.0
        return RateField(starts, ends, rd, wr, self.npages)

    def changes(self):
        k, per = self.arrays, self.array_pages
        alloc = np.stack([np.arange(k) * per, np.arange(1, k + 1) * per], axis=1)
        yield Change(0.0, field=self.field(), alloc=alloc.astype(np.int64), label="sweep")

