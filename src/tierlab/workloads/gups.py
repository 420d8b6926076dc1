"""GUPS (giga-updates per second) and its variants: `gups:uniform|hotset|dynamic|gupspp`.

Work unit: one *update* = read-modify-write of one item, i.e. 1 read + 1 write of one
cache line (rates per update sum to 2: 1 read, 1 write).

Variants:

- ``uniform``: updates spread uniformly over the whole array.
- ``hotset`` (HeMem's GUPS, SOSP'21, and IDT's "hot set" pre-training pattern, HPDC'24):
  a contiguous hot range of ``hot`` bytes receives ``hot_frac`` (0.9) of the updates;
  the other updates go uniformly to the *rest* of the array, so ``hot_frac`` is exactly
  the hot range's share of accesses.
- ``dynamic`` (IDT's "hot set that moves every 150 s"): like hotset, and every ``move``
  simulated seconds (150 s; not scaled, see docs/model.md) the hot range jumps to a new position chosen with
  ``seed``, disjoint from the previous one (wrapping around the end of the array, so a
  hot range may consist of two pieces). Delivered by `timed_changes`; needs
  ``hot <= size / 2``.
- ``gupspp`` (GUPS++, Johnny Cache): ``hot`` bytes worth of hot *items* of ``item``
  bytes (8-64, default 64) sit at random item slots across the whole array, so the hot
  pages are many and scattered (each 4 KiB page holds ~1 hot item: the page-level hot
  set is up to 4096/item times larger than the hot data). ``hot_frac`` of updates go
  uniformly to the hot items, the rest uniformly to the other items. Only pages holding
  hot items get their own segment; their number is bounded by ``max_hot_pages``.

Placement of the hot range (hotset/dynamic): ``hot_start`` = ``end`` (default),
``start`` or a byte offset. By default it sits at the END of the array: the array is
first-touched in address order (GUPS initialises it sequentially), so with DRAM-preferred
allocation the first pages fill DRAM; a hot set at the start would land in DRAM by
luck and placement policies would have nothing to do.

Allocation: the whole array in address order at work 0.

Defaults: ``size`` 64 GiB (twice the 32 GiB DRAM of the built-in machines), ``hot``
8 GiB (fits in DRAM; HeMem sweeps the hot set up to and past DRAM size); for gupspp
``hot`` defaults to 64 MiB of 64 B items, i.e. ~1 M hot items on ~1 M scattered pages
(~4 GiB of 4 KiB pages, and every 2 MiB page is hot); 16 threads,
memory-level parallelism 4 (independent random updates overlap), 5 ns of compute per
update (index generation and loop). Default ``updates`` are chosen so that a run with
every page in DRAM (81 ns, 105 GB/s) lasts about 90 simulated seconds; for ``dynamic``
about 4 move periods (600 s at scale 1), so the hot set moves several times.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import TierlabError
from ..field import RateField, uniq
from ..params import parse_bytes, parse_choice, parse_number
from ..units import PAGE, fmt_size, parse_duration, parse_size
from ._common import (DRAM_NS, MAX_WORK, common_params, default_work, parse_scale,
                      points_over_floor, scaled_pages)
from .base import WORKLOADS, Change, Workload, ranges

# ---------------------------------------------------------------------------------
# GUPS
# ---------------------------------------------------------------------------------

GUPS_VARIANTS = ("uniform", "hotset", "dynamic", "gupspp")


@WORKLOADS.register("gups")
class Gups(Workload):
    """GUPS random updates: uniform, hotset, dynamic (moving hot set), gupspp (scattered items)."""

    #: the parameters that apply to some variants only (registry.py refuses the rest)
    variant_params = {"hot": ("hotset", "dynamic", "gupspp"),
                      "hot_frac": ("hotset", "dynamic", "gupspp"),
                      "hot_start": ("hotset", "dynamic"), "move": ("dynamic",),
                      "item": ("gupspp",), "max_hot_pages": ("gupspp",)}

    def __init__(self, variant="uniform", size="64GiB", hot=None, hot_frac=0.9,
                 hot_start="end", move="150s", item=None, updates=None, threads=16,
                 compute_ns=5.0, mlp=4.0, max_hot_pages=1 << 21, scale=1.0, seed=0):
        super().__init__()
        v = parse_choice(variant, "gups variant", GUPS_VARIANTS)
        scale = parse_scale(scale)
        self.scale = scale
        self.seed = int(seed)
        self.variant = v
        self.name = f"gups:{v}"
        self.threads, self.compute_ns, self.mlp = common_params(threads, compute_ns, mlp,
                                                                what="gups")
        size_b = parse_bytes(size, "gups size", minimum=2 * PAGE)
        n = scaled_pages(size_b, scale)
        self.npages = self.footprint_pages = n
        self.work_unit = "updates"
        self.hot_frac = parse_number(hot_frac, "gups hot_frac", lo=0.0, hi=1.0)

        if hot is None:
            hot = "64MiB" if v == "gupspp" else "8GiB"
        hot_b = parse_bytes(hot, "gups hot", minimum=8)
        params = {"variant": v, "size": fmt_size(n * PAGE), "threads": self.threads}

        if v in ("hotset", "dynamic"):
            h = scaled_pages(hot_b, scale)
            if h >= n:
                raise TierlabError(f"bad gups hot {hot!r}: must be smaller than size {size!r}")
            if v == "dynamic" and 2 * h > n:
                raise TierlabError(
                    f"bad gups hot {hot!r}: a moving hot set needs hot <= size/2 "
                    f"(size {size!r}) so that it can move to a disjoint range")
            hs = str(hot_start).strip().lower()
            if hs == "end":
                start = n - h
            elif hs == "start":
                start = 0
            else:
                off = parse_size(hot_start, "gups hot_start")
                start = int(round(off * scale)) // PAGE
                if start + h > n:
                    raise TierlabError(
                        f"bad gups hot_start {hot_start!r}: hot set would end past the "
                        f"array (size {size!r}); valid: end, start or an offset up to size-hot")
            self.hot_pages = h
            self.hot_start = start
            params.update(hot=fmt_size(h * PAGE), hot_frac=self.hot_frac,
                          hot_start=fmt_size(start * PAGE))
            if v == "dynamic":
                period = parse_duration(move, "gups move")
                if period <= 0:
                    raise TierlabError(f"bad gups move {move!r}: must be > 0")
                self.move_s = period
                params["move_s"] = self.move_s
        elif v == "gupspp":
            it = parse_bytes(item if item is not None else 64, "gups item", minimum=8)
            if it not in (8, 16, 32, 64):
                raise TierlabError(f"bad gups item {item!r}: valid: 8, 16, 32, 64 (bytes)")
            self.item = it
            self.max_hot_pages = parse_number(max_hot_pages, "gups max_hot_pages", lo=1,
                                              integer=True)
            nitems_hot = max(1, int(round(hot_b * scale)) // it)
            slots = PAGE // it
            if nitems_hot >= n * slots:
                raise TierlabError(f"bad gups hot {hot!r}: must be smaller than size {size!r}")
            expect = n * -math.expm1(-nitems_hot / n) if nitems_hot < 50 * n else n
            if expect > self.max_hot_pages:
                raise TierlabError(
                    f"bad gups hot {hot!r}: {nitems_hot} hot items of {it} B scatter over "
                    f"~{int(expect)} pages, more than max_hot_pages={self.max_hot_pages}; "
                    f"lower hot or raise max_hot_pages")
            self.hot_items = nitems_hot
            params.update(hot=fmt_size(nitems_hot * it), item=it, hot_frac=self.hot_frac)

        if updates is None:
            secs = 4 * self.move_s if v == "dynamic" else 90.0
            w = default_work(2.0, self.compute_ns, self.threads, self.mlp, secs) * scale
        else:
            w = parse_number(updates, "gups updates", lo=0.0, hi=MAX_WORK, lo_open=True) * scale
        self.total_work = float(w)
        params["updates"] = self.total_work
        self.params = params
        self._field0 = None

    # -- fields -------------------------------------------------------------------
    def _hot_field(self, start: int) -> RateField:
        n, h, f = self.npages, self.hot_pages, self.hot_frac
        hot = f / h
        cold = (1.0 - f) / (n - h)
        if start + h <= n:
            starts = np.array([0, start, start + h])
            ends = np.array([start, start + h, n])
            rate = np.array([cold, hot, cold])
        else:  # wraps: [start, n) and [0, start + h - n)
            e = start + h - n
            starts = np.array([0, e, start])
            ends = np.array([e, start, n])
            rate = np.array([hot, cold, hot])
        keep = ends > starts
        starts, ends, rate = starts[keep], ends[keep], rate[keep]
        nz = rate > 0
        return RateField(starts[nz], ends[nz], rate[nz], rate[nz], n)

    def _gupspp_field(self) -> RateField:
        rng = np.random.default_rng(self.seed)
        n, slots, k = self.npages, PAGE // self.item, self.hot_items
        total_slots = n * slots
        # k distinct random item slots (draw with replacement, top up collisions).
        chosen = uniq(rng.integers(0, total_slots, size=k, dtype=np.int64))
        while len(chosen) < k:
            more = rng.integers(0, total_slots, size=k - len(chosen), dtype=np.int64)
            chosen = uniq(np.concatenate((chosen, more)))
        pages, counts = uniq(chosen // slots, counts=True)
        f = self.hot_frac
        cold_item = (1.0 - f) / (total_slots - k)
        hot_rate = f * counts / k + cold_item * (slots - counts)
        floor = cold_item * slots
        self.hot_page_list = pages
        # within a hot page the hot items' lines take its hot updates (1 read + 1 write
        # each): what a cache of lines sees (engine/dram_cache.py)
        self._line_skew = (pages, 2.0 * f * counts / k, counts * -(-self.item // 64))
        return points_over_floor(n, 0, n, floor, floor, pages, hot_rate, hot_rate)

    def line_skew(self):
        """(pages, accesses per update on their hot lines, hot lines per page) for
        gupspp; None for the variants whose pages are touched uniformly."""
        if self.variant != "gupspp":
            return None
        self.field()
        return self._line_skew

    def field(self) -> RateField:
        if self._field0 is None:
            if self.variant == "uniform":
                self._field0 = RateField.uniform(0, self.npages, 1.0, 1.0, self.npages)
            elif self.variant == "gupspp":
                self._field0 = self._gupspp_field()
            else:
                self._field0 = self._hot_field(self.hot_start)
        return self._field0

    def changes(self):
        yield Change(0.0, field=self.field(), alloc=ranges((0, self.npages)),
                     label=self.variant)

    def hot_starts(self, count: int) -> list:
        """Start pages of the first `count` hot-set positions (dynamic)."""
        rng = np.random.default_rng(self.seed)
        n, h = self.npages, self.hot_pages
        out = [self.hot_start]
        for _ in range(count - 1):
            jump = h + int(rng.integers(0, n - 2 * h + 1))
            out.append((out[-1] + jump) % n)
        return out

    def timed_changes(self):
        if self.variant != "dynamic":
            return
        # Enough moves for a run 20x slower than all-in-DRAM, capped at 400 changes (the
        # engine runs threads x scale, so a miniature lasts as long as the full run).
        est = self.total_work / (self.threads * self.scale * 1e9
                                 / (self.compute_ns + 2 * DRAM_NS / self.mlp))
        count = int(min(400, max(4, math.ceil(20 * est / self.move_s))))
        starts = self.hot_starts(count + 1)
        for i in range(1, count + 1):
            yield Change(i * self.move_s, field=self._hot_field(starts[i]),
                         label=f"hot set {i}")
