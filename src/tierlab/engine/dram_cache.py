"""Optane memory mode: DRAM as a direct-mapped cache in front of the memory the OS sees
(Johnny Cache, OSDI'23; docs/johnny-cache.md).

Units and frames. The address space is cut into frame-sized units (4 KiB pages, or
2 MiB huge pages with `frame=2MiB`); a unit gets a physical frame from the frame
allocator (engine/frames.py) when its first page is placed and gives it back when its
last page is freed. Frame f is cached in slot f mod nslots.

Rate model (exact in distribution for Poisson access streams). Each line offset of a
slot is one direct-mapped set shared by the units in the slot, each touching its lines
uniformly. With lambda_i the accesses per unit of work of unit i (reads r_i + writes
w_i) and Lambda the slot's sum, an access of i hits when the set's last access was
i's too: q_i = lambda_i / Lambda. So per unit of work:

- hits r_i q_i + w_i q_i, misses r_i (1 - q_i) + w_i (1 - q_i) (a store miss fills
  the line first: write-allocate);
- a line of unit j is filled by a miss of j and evicted at the end of j's run of
  consecutive accesses, so runs end at rate lambda_j (1 - q_j); the run is dirty if any
  of its accesses wrote: P(clean) = (1 - f)(1 - q) / (1 - q (1 - f)), f = w_j /
  lambda_j (run lengths are geometric with continuation q). Dirty runs cost a
  write-back to the slow memory: a miss can cost a write-back plus a fill.

Hot lines (workloads with `line_skew()`, such as GUPS++: pages whose hot items take
most of their accesses on a few lines). Unit i has h_i accesses on c_i hot lines and
g_i = lambda_i - h_i spread over its L lines (b_i = g_i / L per line); in a slot whose
units' per-line background sums to B, a hot line hits with q = (h_i / c_i) /
(h_i / c_i + B - b_i) and a background line with q = b_i / B (a hot line of another
unit landing on the same offset is ignored: c_j / L of the offsets). Without hot lines
this is the rule above. This is what lets a cache of lines keep scattered hot items
that page-granularity placement cannot separate from their cold neighbours.

Cyclic sweeps (workloads with `sweep` = True, such as `stream`) are not Poisson: between
two visits to a line every other accessed unit of its slot is visited once, so a unit
that shares its slot with another accessed unit always misses (q_i = 0) and one alone
always hits (q_i = 1); the write-back rule above then gives each miss the dirtiness of
the line it evicts.

Costs, as two devices for the closed-loop solver (engine/throughput.py): the DRAM
serves hits at its latency and takes the fills' writes (bandwidth only); the slow
memory serves misses at its read latency plus the DRAM tag check and takes the
write-backs (bandwidth only).
"""
from __future__ import annotations

import numpy as np

from ..machines.machine import CacheSpec
from ..units import PAGE
from .frames import make_allocator


class DramCache:
    """The frames of a run and what they cost through the DRAM cache."""

    #: device names in the run record's tier_access_share
    DEVICES = ("dram-cache", "slow-memory")

    def __init__(self, sim, spec: CacheSpec, allocator: str = "random"):
        self.sim, self.spec = sim, spec
        self.fp = spec.frame_pages
        npages = sim.workload.npages
        self.nunits = -(-npages // self.fp)
        self.frame = np.full(self.nunits, -1, dtype=np.int64)
        self._pages_in = np.zeros(self.nunits, dtype=np.int32)
        nframes = sim.machine.capacity_pages // self.fp
        self.allocator = make_allocator(allocator, nframes, spec.nslots,
                                        sim.rng_for("frames:" + allocator))
        self.remapped = 0
        self._wb_acc = 0.0
        self._model = None

    # ------------------------------------------------------------------ frames
    def _units(self, start: int, end: int):
        """Units overlapping pages [start, end) and how many of those pages each holds."""
        u0, u1 = start // self.fp, (end - 1) // self.fp + 1
        units = np.arange(u0, u1, dtype=np.int64)
        lo = np.maximum(units * self.fp, start)
        hi = np.minimum((units + 1) * self.fp, end)
        return units, (hi - lo).astype(np.int32)

    def on_alloc(self, start: int, end: int) -> None:
        units, n = self._units(start, end)
        new = units[self.frame[units] < 0]
        if new.size:
            self.frame[new] = self.allocator.alloc(new.size)
        self._pages_in[units] += n
        self._model = None

    def on_free(self, start: int, end: int) -> None:
        units, n = self._units(start, end)
        self._pages_in[units] -= n
        gone = units[(self._pages_in[units] <= 0) & (self.frame[units] >= 0)]
        if gone.size:
            self.allocator.free(self.frame[gone])
            self.frame[gone] = -1
        self._model = None

    def slot_of(self, units) -> np.ndarray:
        return self.frame[np.asarray(units, dtype=np.int64)] % self.spec.nslots

    def remap(self, units, slots) -> int:
        """Move each unit to a free frame of the matching slot (Johnny Cache's dynamic
        policy); the copies are charged as background migrations. Returns the count."""
        units = np.asarray(units, dtype=np.int64)
        if units.size == 0:
            return 0
        old = self.frame[units].copy()
        self.frame[units] = self.allocator.alloc_in(slots)
        self.allocator.free(old)
        self.remapped += int(units.size)
        self.sim.stats.by_reason["remap"] = self.sim.stats.by_reason.get("remap", 0) \
            + int(units.size) * self.fp
        self.sim.stats.migrated_bytes += int(units.size) * self.fp * PAGE
        self.sim._charge_copy(int(units.size) * self.fp, sync=False, copies=1)
        self._model = None
        self.sim._x_dirty = True
        return int(units.size)

    # ------------------------------------------------------------------ model
    def unit_rates(self):
        """(units, reads, writes): the allocated units and their accesses per work."""
        units = np.flatnonzero(self.frame >= 0)
        f = self.sim.timeline.field
        if self.fp == 1:
            r, w = f.rate_of(units)
        else:
            r, w = f.range_sum(units * self.fp,
                               np.minimum((units + 1) * self.fp, f.npages))
        return units, np.asarray(r, dtype=float), np.asarray(w, dtype=float)

    def invalidate(self) -> None:
        self._model = None

    def hot_lines(self, units):
        """(hot accesses per work, hot lines) of each unit from the workload's
        `line_skew()`; zeros without one."""
        h, c = np.zeros(units.size), np.zeros(units.size)
        skew = getattr(self.sim.workload, "line_skew", None)
        got = skew() if skew is not None else None
        if got is not None:
            pages, rate, lines = (np.asarray(x) for x in got)
            idx = np.searchsorted(units, pages // self.fp)
            ok = (idx < units.size) & (units[np.minimum(idx, units.size - 1)] == pages // self.fp)
            h = np.bincount(idx[ok], rate[ok], minlength=units.size)
            c = np.bincount(idx[ok], lines[ok], minlength=units.size)
        return h, c

    def model(self) -> dict:
        """Hits, misses and write-backs per unit of work (see the module docstring)."""
        if self._model is not None:
            return self._model
        units, r, w = self.unit_rates()
        lam = r + w
        f = np.divide(w, lam, out=np.zeros_like(lam), where=lam > 0)
        slot = self.frame[units] % self.spec.nslots
        nslots = self.spec.nslots
        if getattr(self.sim.workload, "sweep", False):
            tot = np.bincount(slot, lam, minlength=nslots)
            parts = [(lam, (lam == tot[slot]).astype(float) * (lam > 0))]
        else:
            h, c = self.hot_lines(units)
            h = np.minimum(h, lam)
            g = lam - h
            b = g / (64 * self.fp)
            B = np.bincount(slot, b, minlength=nslots)[slot]
            q_bg = np.divide(b, B, out=np.zeros_like(b), where=B > 0)
            a = np.divide(h, c, out=np.zeros_like(h), where=c > 0)
            q_hot = np.divide(a, a + B - b, out=np.ones_like(a), where=a + B - b > 0)
            parts = [(g, q_bg), (h, q_hot)]
        hit = miss = wb = hit_w = 0.0
        for x, q in parts:
            den = 1.0 - q * (1.0 - f)
            clean = np.divide((1.0 - f) * (1.0 - q), den, out=np.ones_like(x), where=den > 0)
            hit += float((x * q).sum())
            hit_w += float((x * f * q).sum())
            miss += float((x * (1 - q)).sum())
            wb += float((x * (1 - q) * (1 - clean)).sum())
        hit_r = hit - hit_w
        miss_w = float((lam * f).sum()) - hit_w
        shared = np.bincount(slot, minlength=nslots)[slot] > 1
        self._model = {
            "hit_r": hit_r, "hit_w": hit_w, "miss_r": miss - miss_w, "miss_w": miss_w,
            "writeback": wb, "units": int(units.size), "units_sharing": int(shared.sum()),
        }
        return self._model

    def devices(self, pm_read_lat: float, pm_write_lat: float, pm_read_bw: float,
                pm_write_bw: float):
        """Solver inputs for (DRAM cache, slow memory): reads, writes, latencies,
        bandwidths and the bandwidth-only writes (fills, write-backs)."""
        m, c = self.model(), self.spec
        miss = m["miss_r"] + m["miss_w"]
        return {"reads": [m["hit_r"], miss], "writes": [m["hit_w"], 0.0],
                "lat_r": [c.read_lat_ns, pm_read_lat + c.read_lat_ns],
                "lat_w": [c.write_lat_ns, pm_write_lat],
                "bw_r": [c.read_bw, pm_read_bw], "bw_w": [c.write_bw, pm_write_bw],
                "extra_w": [miss, m["writeback"]]}

    def acc_per_work(self) -> np.ndarray:
        """Accesses per work served by (the DRAM cache, the slow memory)."""
        m = self.model()
        return np.array([m["hit_r"] + m["hit_w"], m["miss_r"] + m["miss_w"]])

    def stats(self, acc) -> dict:
        """The run record's `dram_cache` entry."""
        m = self.model()
        tot = float(np.sum(acc))
        return {"size_bytes": self.spec.size, "frame": self.spec.frame,
                "slots": self.spec.nslots, "allocator": self.allocator.registered_name,
                "hit_ratio": float(acc[0]) / tot if tot else 0.0,
                "writebacks": float(self._wb_acc), "remapped_units": self.remapped,
                "units": m["units"], "units_sharing_a_slot": m["units_sharing"]}

    def advance(self, dw: float) -> np.ndarray:
        """Accesses per device over `dw` units of work (and count the write-backs)."""
        self._wb_acc += self.model()["writeback"] * dw
        return self.acc_per_work() * dw
