"""`idt-regions`: IDT's region monitor (HPDC'24; public code scale-snu/IDT, mm/damon).

Built on DAMON (`damon.py`: regions over the allocated address space, min/max regions,
the prepare/check accessed-bit pattern, the age rule) with IDT's changes, run every
**sampling interval** as the paper's slides describe ("Sample 2 pages at each
sample_interval; manage history, access, age"):

- sampling interval 10 ms, aggregation 1 s, 1,000-10,000 regions;
- every sampling interval (`on_sample`), **two** random pages per region are checked
  (a stateless prepare/check of each, `sim.bits.test_since`, exact in distribution for
  the rate model and per access for an exact replay); the region counts as accessed in
  that interval when either page was: `nr_accesses` counts such intervals over the
  aggregation;
- `history`, one bit per region per sampling interval (`history=sample`, the default),
  kept in a ring buffer of `history_bits` bits per region, 1,024 by default: the public
  code's `IDT_HISTOGRAM_SIZE` (scale-snu/IDT, include/linux/damon.h), written at a
  circular index every sampling interval (mm/damon/vaddr.c `__damon_va_check_access`).
  The public code only ever sets entries, never clears them; tierlab writes both
  values, as the code means to. `history_bits=64` is the earlier length; the rule of
  one bit per aggregation (nr_accesses > 0) is `history=aggregation`;
- **split** ("Split region when the access status of the sampling pages differs at
  sample_interval"): after each sampling interval a region whose two pages disagreed is
  cut in two. The paper says when, not where; the public code cuts at the region's
  middle (vaddr.c `__damon_va_check_access`: `damon_split_region_at(..., sz_region /
  2)`), `split_at=middle`, the default; `split_at=between` cuts halfway between the
  two sampled pages, so the accessed and the idle page land in different halves, and
  `split_at=random` at a uniform page. Splits stop at max_nr_regions (the paper's
  1,000-10,000; the public code checks no bound there), a random subset of the
  disagreeing regions when there is room for fewer. Both halves keep nr_accesses, age
  and history (the public code's new half starts with nr_accesses 0, damon_new_region
  in core.c, so it loses the aggregation's count so far: a slip upstream DAMON later
  fixed by copying it; tierlab keeps it);
- subscribers to the sampling interval (`subscribe_sample`, IDT's ARP) run after each
  interval's check, before its splits, with that interval's accessed flags;
- every aggregation (`aggregate`): `age` by IDT's rule (`age_rule=idt`, the default):
  +1 per aggregation, 0 whenever nr_accesses changed at all since the last aggregation
  (the public kernel's mm/damon/core.c `damon_merge_regions_of`: `if
  (abs(r->nr_accesses - r->last_nr_accesses)) r->age = 0;`); upstream DAMON's rule, 0
  only when it moved by more than max_nr_accesses / 10, is `age_rule=damon`. Then the
  **merge** of neighbours on the same node (a region's node is its middle page's)
  whose histories pass Fisher's exact test on [[a_i, n - a_i], [a_j, n - a_j]] at
  `fisher_alpha` (10%, the 90% level) in every sliding window of `window` (n = 16)
  valid history bits, about 1,008 windows once 1,024 bits are kept
  (mm/damon/idt-region.c `idt_merge_region`; the table computed once, exactly as
  scipy's `fisher_exact`; the public code's |a_i - a_j| <= 2 is `merge_rule=public`).
  The windows slide over the bits in time order, newest first; the public code slides
  them over the buffer's positions, so one of its windows joins the newest bits to
  the oldest. Merged runs are formed from neighbour pairs (chained), capped at
  DAMON's size limit, and keep their first region's
  history and last_nr_accesses, with size-weighted nr_accesses and age; then the
  aggregation subscribers (IDT's demotion), the reset of nr_accesses, and DAMON's ops
  update of the monitored ranges;
- `reset_after_move(idx)` zeroes age and nr_accesses of migrated regions (IDT's rule).

Assumption: the public code demotes before it ages and merges (mm/damon/core.c
`kdamond_fn`: `idt_demote`, then `kdamond_merge_regions`), so its demotion reads the
ages of the previous aggregation; here the subscribers (IDT's demotion) run after the
age rule and the merge, on this aggregation's ages.

`stats()` adds `mean_merged_hamming`: the mean normalised Hamming distance between the
histories of regions merged together (the paper's measure of merge quality);
`mean_merged_hamming_aggr`, the same over a measurement-only history of one bit per
aggregation (nr_accesses > 0), the unit plain `damon` reports in; and `splits`.
"""
from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from math import comb

import numpy as np

from ..errors import TierlabError
from ..params import parse_choice, parse_number
from .base import MONITORS, Monitor
from .damon import Damon, Regions, UNALLOC, _i64, hamming
from ..jit import kernel

HISTORY_RULES = ("sample", "aggregation")
SPLIT_RULES = ("middle", "between", "random")
AGE_RULES = ("idt", "damon")
#: the longest history a region may keep (bits)
MAX_HISTORY_BITS = 65536


def history_distance(h1, h2) -> np.ndarray:
    """Bits that differ between ring-buffer histories ((..., words) uint64): the
    Hamming distance of each pair of rows (mm/damon/idt-utils.c `idt_hamming_distance`)."""
    x = np.bitwise_xor(np.asarray(h1, dtype=np.uint64), np.asarray(h2, dtype=np.uint64))
    return np.bitwise_count(x).sum(axis=-1, dtype=np.int64)


def _buffers(n: int, words: int) -> np.ndarray:
    """n empty ring buffers, (n, words) uint64 in column-major order: a word of every
    region's buffer is contiguous, so a sampling interval writes its bits in one pass."""
    return np.zeros((n, words), dtype=np.uint64, order="F")


def _rows(h, idx) -> np.ndarray:
    """h[idx] for ring buffers h, in `_buffers`' column-major order."""
    return np.take(np.asfortranarray(h, dtype=np.uint64).T, idx, axis=1).T


@dataclass
class IdtRegionSnapshot(Regions):
    """DAMON's region snapshot plus the access history: one ring buffer per region,
    (R, words) uint64 (`IdtRegions.recent_history` reads it in time order)."""

    history: np.ndarray = None


@lru_cache(maxsize=None)
def fisher_similar_table(n: int, alpha: float) -> np.ndarray:
    """(n+1, n+1) bool: counts a, b of n trials are similar iff Fisher's exact test
    (two-sided) on [[a, n-a], [b, n-b]] gives p >= alpha. The p-value in exact
    integers: given the column total K = a + b, the top-left cell x has weight C(n, x)
    C(n, K - x) out of C(2n, K) (the hypergeometric law), and p sums the weights of
    every x no more likely than a -- scipy.stats.fisher_exact's rule (its 1e-14
    tolerance on ties cannot matter at these sizes; tests/test_idt_monitor.py checks the
    tables against scipy), without importing scipy.stats in every IDT run."""
    t = np.ones((n + 1, n + 1), dtype=bool)
    for a in range(n + 1):
        for b in range(a + 1, n + 1):
            k = a + b
            w = [comb(n, x) * comb(n, k - x) for x in range(max(0, k - n), min(n, k) + 1)]
            obs = comb(n, a) * comb(n, k - a)
            p = Fraction(sum(x for x in w if x <= obs), comb(2 * n, k))
            t[a, b] = t[b, a] = float(p) >= alpha  # p rounded once, as scipy returns it
    t.flags.writeable = False
    return t


def public_similar_table(n: int) -> np.ndarray:
    """The public code's lookup table: |a - b| <= 2."""
    a = np.arange(n + 1)
    return np.abs(a[:, None] - a[None, :]) <= 2


@MONITORS.register("idt-regions")
class IdtRegions(Damon):
    """IDT's region monitor: two samples per region every sampling interval, per-sample
    history and splits, Fisher-test merge at each aggregation."""

    #: two pages a region each sample (the Linux backend sets 1 on one it feeds from the
    #: kernel's DAMON, linux/backend.py attach_damon)
    pages_per_sample = 2

    def __init__(self, sample="10ms", aggr="1s", update="1s", min_nr_regions=1000,
                 max_nr_regions=10000, history_bits=1024, window=16, fisher_alpha=0.10,
                 merge_rule="fisher", history="sample", split_at="middle", age_rule="idt",
                 target=None, name="idt-regions"):
        super().__init__(sample=sample, aggr=aggr, update=update,
                         min_nr_regions=min_nr_regions, max_nr_regions=max_nr_regions,
                         target=target, name=name)
        self.params.update(history_bits=history_bits, window=window,
                           fisher_alpha=fisher_alpha, merge_rule=merge_rule,
                           history=history, split_at=split_at, age_rule=age_rule)
        self.history_bits = parse_number(history_bits, "idt-regions history_bits", lo=1,
                                         hi=MAX_HISTORY_BITS, integer=True)
        self.window = parse_number(window, "idt-regions window", lo=1,
                                   hi=MAX_HISTORY_BITS, integer=True)
        if not 1 <= self.window <= self.history_bits <= MAX_HISTORY_BITS:
            raise TierlabError(f"bad idt-regions history_bits={history_bits} "
                               f"window={window}: need 1 <= window <= history_bits <= "
                               f"{MAX_HISTORY_BITS}")
        self.fisher_alpha = parse_number(fisher_alpha, "idt-regions fisher_alpha", lo=0.0,
                                         hi=1.0, lo_open=True)
        self.merge_rule = parse_choice(merge_rule, "idt-regions merge_rule",
                                       ("fisher", "public"))
        self.history = parse_choice(history, "idt-regions history", HISTORY_RULES)
        self.split_rule = parse_choice(split_at, "idt-regions split_at", SPLIT_RULES)
        self.age_rule = parse_choice(age_rule, "idt-regions age_rule", AGE_RULES)
        self._words = (self.history_bits + 63) // 64
        z = np.zeros(0, dtype=np.int64)
        self._hist = _buffers(0, self._words)
        self._acc = z  # this aggregation's accessed intervals per region
        self._nsamp = 0  # sampling intervals taken in this aggregation
        self._hpos = 0  # history bits written so far (the next goes at _hpos % bits)
        self._snap_hist = self._hist
        self._sample_subs = []
        self._live = False
        self.merges = 0
        self.splits = 0
        self._ham_sum = 0.0

    # -- per-region arrays kept aligned with the regions ---------------------------
    def _per_region(self):
        return ("_nr", "_last", "_age", "_hist", "_acc", "_mh")

    def _fit(self) -> None:
        """Before the first regions are built (or after a change nothing refitted):
        per-region state sized to the regions, empty."""
        r = self.nr_regions
        if self._hist.shape[0] != r or self._acc.shape[0] != r or self._mh.shape[0] != r:
            self._refit(np.zeros(0, np.int64), np.zeros(0, np.int64))

    def _refit(self, old_s, old_e) -> None:
        """After an ops update: carry history over by start address."""
        R = self.nr_regions
        if old_s.size and self._hist.shape[0] == old_s.shape[0]:
            i = np.searchsorted(old_s, self._s, side="right") - 1
            ok = (i >= 0) & (self._s < old_e[np.clip(i, 0, None)])
            i = np.clip(i, 0, None)
            self._hist = np.asfortranarray(np.where(ok[:, None], _rows(self._hist, i),
                                                    np.uint64(0)), dtype=np.uint64)
            self._mh = np.where(ok, self._mh[i], np.uint64(0)).astype(np.uint64)
        else:
            self._hist = _buffers(R, self._words)
            self._mh = np.zeros(R, dtype=np.uint64)
        self._acc = np.zeros(R, dtype=np.int64)

    @property
    def regions(self) -> IdtRegionSnapshot:
        """During a sampling-interval subscriber: the live regions with this
        aggregation's counts so far; during an aggregation subscriber: the merged
        regions; otherwise the snapshot taken after the last aggregation."""
        self._fit()
        if self._live:
            return IdtRegionSnapshot(self._s, self._e, self._acc, self._age, self._last,
                                     history=self._hist)
        r = super().regions
        h = self._hist if (self._in_aggr or self._snap is None) else self._snap_hist
        return IdtRegionSnapshot(r.start, r.end, r.nr_accesses, r.age, r.last_nr_accesses,
                                 history=h)

    def subscribe_sample(self, fn) -> None:
        """Call fn(monitor, now, accessed) after every sampling interval's check
        (accessed: bool per region, either page accessed), before its splits."""
        self._sample_subs.append(fn)

    def reset_after_move(self, idx) -> None:
        """IDT zeroes age and nr_accesses of a region after migrating it."""
        idx = np.asarray(idx, dtype=np.int64)
        self.reset_age(idx)
        for name in ("_nr", "_acc"):
            a = getattr(self, name)
            if a.shape[0] == self.nr_regions:
                a = a.copy()
                a[idx] = 0
                setattr(self, name, a)

    def set_regions(self, start, end, nr_accesses=None, age=None, last_nr_accesses=None):
        super().set_regions(start, end, nr_accesses, age, last_nr_accesses)
        self._refit(np.zeros(0, np.int64), np.zeros(0, np.int64))

    # -- the kdamond loop in the simulator: one call per sampling interval -----------
    def attach(self, sim) -> None:
        if getattr(sim, "real", False):  # the Linux backend drives on_sample/aggregate
            super().attach(sim)
            return
        Monitor.attach(self, sim)
        self.rng = sim.rng_for(self.name)
        self.scale_regions(sim)
        monitors = getattr(sim, "monitors", None)
        if isinstance(monitors, dict):
            monitors.setdefault(self.name, self)
        sim.every(self.sample_interval, self._tick, offset=0.0)

    def _tick(self, now: float) -> None:
        """One sampling interval: check the two pages of every region set at the last
        tick, then (every samples_per_aggr ticks) aggregate. Ticks that come late (a
        daemon's thread busy: `engine.DaemonSteps`) aggregate when the aggregation's
        time has come, their counts scaled to samples_per_aggr, as the Linux backend's
        sampler does (linux/idle_sampler.py); on time, the two rules agree."""
        if self._t_last is None:
            self.ops_update(now, force=True)
            self._t_last = now
            self._next_aggr = now + self.samples_per_aggr * self.sample_interval
            return
        t0, self._t_last = self._t_last, now
        R = self.nr_regions
        if R:
            self._fit()
            pab = draw_pairs(self.rng, self._s, self._e)  # damon_rand(start, end), twice
            pa, pb = pab[:R], pab[R:]
            ab = self.sim.bits.test_since(0, pab, t0, now)
            a, b = ab[:R], ab[R:]
            self.charge_checks(4 * R)  # two pages, each a prepare (clear) and a check
            self.on_sample(a, b, pa, pb, now)
        spa = self.samples_per_aggr
        if self._nsamp >= spa or (self._nsamp and
                                  now >= self._next_aggr - self.sample_interval / 2):
            if self.nr_regions:
                self.aggregate(self.counts_per_aggregation(self._nsamp), now)
            self._next_aggr += spa * self.sample_interval
            if self._next_aggr <= now:
                self._next_aggr = now + spa * self.sample_interval
            if now + 1e-12 >= self._next_update:
                self.ops_update(now)

    def counts_per_aggregation(self, samples: int) -> np.ndarray:
        """This aggregation's counts over `samples` sampling intervals, scaled to
        samples_per_aggr (unchanged when they are that many)."""
        spa = self.samples_per_aggr
        if samples == spa:
            return self._acc
        return np.rint(self._acc * (spa / samples)).astype(np.int64)

    def ops_update(self, now: float, force: bool = False) -> None:
        """DAMON's ops update (`Damon._ops_update`), with the history carried over."""
        old_s, old_e = self._s, self._e
        self._ops_update(now, force=force)
        if force or self._s is not old_s:
            self._refit(old_s, old_e)

    # -- what one sampling interval saw (shared with linux/idle_sampler.py) ------------
    def on_sample(self, a, b, pa, pb, now: float) -> None:
        """Account one sampling interval: a, b = whether each region's two pages (at
        pages pa, pb) were accessed. nr_accesses and history, the sampling-interval
        subscribers (ARP), then the splits of disagreeing regions."""
        self._fit()
        a, b = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
        push = self.history == "sample"
        w, bit = self._slot()
        acc = sample_account(a, b, self._acc, self._hist, w, bit, push)
        dis = a ^ b
        self._nsamp += 1
        self._hpos += push
        if self._sample_subs:
            self._live = True
            try:
                for fn in self._sample_subs:
                    fn(self, now, acc)
            finally:
                self._live = False
        self._split_pairs(np.flatnonzero(dis), np.asarray(pa, np.int64),
                          np.asarray(pb, np.int64))

    def _split_pairs(self, cand, pa, pb) -> None:
        room = self.max_nr_regions - self.nr_regions
        if room <= 0 or cand.size == 0:
            return
        s, e = self._s, self._e
        if self.split_rule == "middle":
            cut = s[cand] + (e[cand] - s[cand]) // 2
        elif self.split_rule == "between":
            lo, hi = np.minimum(pa[cand], pb[cand]), np.maximum(pa[cand], pb[cand])
            cut = (lo + hi + 1) // 2
        else:
            cut = s[cand] + 1 + (self.rng.random(cand.size) *
                                 (e[cand] - s[cand] - 1)).astype(np.int64)
        ok = (cut > s[cand]) & (cut < e[cand])
        cand, cut = cand[ok], cut[ok]
        if cand.size > room:
            pick = np.sort(self.rng.permutation(cand.size)[:room])
            cand, cut = cand[pick], cut[pick]
        if cand.size:
            self.split_many(cand, cut)

    def split_many(self, idx, cut) -> None:
        """Cut regions idx (sorted) at pages cut: [start, cut) and [cut, end), both
        keeping every per-region value (damon_split_region_at, vectorised)."""
        self._fit()
        idx = np.asarray(idx, dtype=np.int64)
        owner = np.sort(np.concatenate((np.arange(self.nr_regions), idx)))
        dup = np.concatenate(([False], owner[1:] == owner[:-1]))
        cuts = np.empty(self.nr_regions, dtype=np.int64)
        cuts[idx] = cut
        new_s = self._s[owner].copy()
        new_e = self._e[owner].copy()
        new_s[dup] = cuts[owner[dup]]
        new_e[np.flatnonzero(dup) - 1] = new_s[dup]
        for name in self._per_region():
            a = getattr(self, name)
            setattr(self, name, _rows(a, owner) if name == "_hist" else a[owner])
        self._s, self._e = new_s, new_e
        self.splits += int(idx.size)

    def split_at(self, i: int, page: int) -> None:
        i, page = int(i), int(page)
        if not self._s[i] < page < self._e[i]:
            raise ValueError(f"split point {page} outside region {i} "
                             f"[{self._s[i]}, {self._e[i]})")
        self.split_many([i], [page])

    # -- the history ring buffers ----------------------------------------------------
    def _push(self, bit) -> None:
        """Write one history bit per region at the circular index (vaddr.c
        `__damon_va_check_access`), overwriting the oldest once the buffer is full."""
        w, b = self._slot()
        col = self._hist[:, w] & ~np.uint64(1 << b)
        self._hist[:, w] = col | (np.asarray(bit, dtype=np.uint64) << np.uint64(b))
        self._hpos += 1

    def _slot(self) -> tuple[int, int]:
        """(word, bit) of the circular index the next history bit goes to."""
        return divmod(self._hpos % self.history_bits, 64)

    def _valid_bits(self) -> int:
        return min(self._hpos, self.history_bits)

    def recent_history(self, k: int = 64, hist=None) -> np.ndarray:
        """The k (<= 64) newest history bits of each region as one uint64, bit 0 the
        newest (of `hist`, a snapshot's ring buffers, or the live ones)."""
        h = self._hist if hist is None else hist
        k = min(int(k), 64, self._valid_bits())
        if k == 0:
            return np.zeros(h.shape[0], dtype=np.uint64)
        bits = ring_bits(h, (self._hpos - 1) % self.history_bits, k, self.history_bits)
        return (bits.astype(np.uint64) << np.arange(k, dtype=np.uint64)).sum(
            axis=1, dtype=np.uint64)

    # -- aggregation ---------------------------------------------------------------
    def _similar(self, h, valid: int) -> np.ndarray:
        """similar[i]: regions i and i+1 pass the test in every window."""
        if valid == 0 or h.shape[0] < 2:
            return np.ones(max(h.shape[0] - 1, 0), dtype=bool)
        n = min(self.window, valid)
        table = (fisher_similar_table(n, self.fisher_alpha) if self.merge_rule == "fisher"
                 else public_similar_table(n))
        return similar_pairs(h, (self._hpos - 1) % self.history_bits, valid, self.window,
                             self.history_bits, table)

    def _merge(self) -> None:
        s, e, h = self._s, self._e, self._hist
        R = s.shape[0]
        if R < 2:
            return
        node = self.sim.mem.node[(s + e - 1) // 2]
        valid = self._valid_bits()
        ok = (s[1:] == e[:-1]) & (node[1:] == node[:-1]) & (node[1:] != UNALLOC)
        ok &= self._similar(h, valid)
        head = np.concatenate(([True], ~ok))
        sz = e - s
        run = np.cumsum(head) - 1
        first = np.flatnonzero(head)
        # cap runs at DAMON's size limit: cut where the run's cumulative size crosses it
        cum = np.cumsum(sz) - np.concatenate(([0], np.cumsum(sz)))[first][run]
        piece = (cum - 1) // max(self.sz_limit, 1)
        head |= np.concatenate(([False], piece[1:] != piece[:-1]))
        first = np.flatnonzero(head)
        if first.size == R:
            return
        run = np.cumsum(head) - 1
        merged = ~head
        self.merges += int(merged.sum())
        self._ham_sum += float(history_distance(h[merged], h[first][run[merged]]).sum()) / \
            max(valid, 1)
        mh = self._mh
        self._mh_sum += float(hamming(mh[merged], mh[first][run[merged]]).sum()) / \
            max(min(self.nr_aggregations, 64), 1)
        self._mh = mh[first]
        tot = np.bincount(run, weights=sz)
        self._nr = (np.bincount(run, weights=self._nr * sz) // tot).astype(np.int64)
        self._age = (np.bincount(run, weights=self._age * sz) // tot).astype(np.int64)
        lastidx = np.append(first[1:] - 1, R - 1)
        self._s, self._e, self._last = s[first], e[lastidx], self._last[first]
        self._hist = _rows(h, first)
        self._acc = np.zeros(first.size, dtype=np.int64)

    def aggregate(self, nr_accesses, now: float = 0.0) -> None:
        """Age rule, history (`history=aggregation`), IDT merge, subscribers (IDT's
        demotion), reset of the aggregation's counts."""
        self._fit()
        nr = np.minimum(_i64(nr_accesses), self.max_nr_accesses)
        if nr.shape != self._s.shape:
            raise ValueError("nr_accesses must have one value per region")
        self.nr_aggregations += 1
        self.max_observed = int(nr.max()) if nr.size else 0
        thres = self.max_nr_accesses // 10 if self.age_rule == "damon" else 0
        self._age = np.where(np.abs(nr - self._last) > thres, 0, self._age + 1)
        self._nr = nr
        # measurement only (as Damon keeps it): one bit per aggregation, nr_accesses > 0
        self._mh = (self._mh << np.uint64(1)) | (nr > 0).astype(np.uint64)
        if self.history == "aggregation":
            self._push(nr > 0)
        self._merge()
        self._publish(now)
        self._snap_hist = self._hist.copy(order="K")  # written in place
        R = self.nr_regions
        self._acc = np.zeros(R, dtype=np.int64)
        self._nsamp = 0

    def stats(self) -> dict:
        d = super().stats()
        d["merges"] = self.merges
        d["splits"] = self.splits
        d["mean_merged_hamming"] = self._ham_sum / self.merges if self.merges else None
        # in the unit of Damon's measurement: histories of one bit per aggregation
        d["mean_merged_hamming_aggr"] = self._mh_sum / self.merges if self.merges \
            else None
        return d


# -- compiled kernels (tierlab.jit) --------------------------------------------
def _similar_pairs_numpy(h, newest, valid, window, nbits, table):
    c = window_counts(h, newest, valid, window, nbits)
    return table[c[:-1], c[1:]].all(axis=1)


@kernel(numpy=_similar_pairs_numpy)
def _similar_pairs(h, newest, valid, window, nbits, table):
    # h: (R, words) ring buffers of nbits bits; the k-th newest bit sits at position
    # (newest - k) mod nbits (word p >> 6, bit p & 63); windows slide from the newest.
    # Two identical buffers have equal counts in every window: similar whenever the
    # table's diagonal is (always for Fisher's test and the public rule). Each buffer
    # is copied once into a small row (x, then y) read many times
    r = h.shape[0]
    words = h.shape[1]
    out = np.ones(max(r - 1, 0), np.bool_)
    if r < 2:
        return out
    w = min(window, valid)
    diag = True
    for a in range(w + 1):
        diag = diag and table[a, a]
    one = np.uint64(1)
    x = np.empty(words, np.uint64)
    y = np.empty(words, np.uint64)
    for q in range(words):
        y[q] = h[0, q]
    for i in range(r - 1):
        x, y = y, x
        same = True
        for q in range(words):
            y[q] = h[i + 1, q]
            same = same and y[q] == x[q]
        if same and diag:
            continue
        ca = 0
        cb = 0
        p = newest
        for k in range(w):  # the window of the w newest bits
            ca += np.int64((x[p >> 6] >> np.uint64(p & 63)) & one)
            cb += np.int64((y[p >> 6] >> np.uint64(p & 63)) & one)
            p = p - 1 if p > 0 else nbits - 1
        pin, pout = p, newest  # the bits entering and leaving at the next slide
        k = 0
        while True:
            if not table[ca, cb]:
                out[i] = False
                break
            if k + w >= valid:
                break
            ca += np.int64((x[pin >> 6] >> np.uint64(pin & 63)) & one)
            ca -= np.int64((x[pout >> 6] >> np.uint64(pout & 63)) & one)
            cb += np.int64((y[pin >> 6] >> np.uint64(pin & 63)) & one)
            cb -= np.int64((y[pout >> 6] >> np.uint64(pout & 63)) & one)
            pin = pin - 1 if pin > 0 else nbits - 1
            pout = pout - 1 if pout > 0 else nbits - 1
            k += 1
    return out


def similar_pairs(h, newest: int, valid: int, window: int, nbits: int,
                  table) -> np.ndarray:
    """IDT's merge test of neighbours i, i+1 (`IdtRegions._similar`): table[c_i, c_j]
    for the accessed-bit counts of every sliding window of `window` bits over the
    `valid` newest bits of each region's ring buffer of `nbits` bits ((R, words)
    uint64, the newest bit at position `newest`; one window of `valid` bits if fewer),
    stopping at the first window that fails, where numpy counts every window."""
    return _similar_pairs(np.asarray(h, dtype=np.uint64), int(newest),
                          int(valid), int(window), int(nbits),
                          np.ascontiguousarray(table, dtype=np.bool_))


def ring_bits(h: np.ndarray, newest: int, valid: int, nbits: int) -> np.ndarray:
    """(R, valid) uint8: the `valid` newest bits of each ring buffer `h` ((R, words)
    uint64 of `nbits` bits, the newest at position `newest`), newest first."""
    h = np.asarray(h, dtype=np.uint64)
    p = (int(newest) - np.arange(int(valid))) % int(nbits)
    return ((h[:, p >> 6] >> (p & 63).astype(np.uint64)) & np.uint64(1)).astype(np.uint8)


def window_counts(h: np.ndarray, newest: int, valid: int, window: int,
                  nbits: int) -> np.ndarray:
    """(R, windows): accessed bits in every sliding window of `window` bits over the
    `valid` newest bits of each ring buffer (one window of `valid` bits if fewer)."""
    w = min(window, valid)
    c = np.zeros((np.shape(h)[0], valid + 1), dtype=np.int32)
    np.cumsum(ring_bits(h, newest, valid, nbits), axis=1, out=c[:, 1:])
    return (c[:, w:] - c[:, :valid - w + 1]).astype(np.int64)


def _sample_account_numpy(a, b, count, h, word, bit, push):
    acc = a | b
    count += acc
    if push:
        col = h[:, word] & ~np.uint64(1 << bit)
        h[:, word] = col | (acc.astype(np.uint64) << np.uint64(bit))
    return acc


@kernel(numpy=_sample_account_numpy)
def _sample_account(a, b, count, h, word, bit, push):
    # IdtRegions.on_sample: acc = a | b per region, count += acc and, with push, acc
    # written as bit `bit` of word `word` of each ring buffer (h: (R, words) uint64);
    # returns acc
    r = a.shape[0]
    acc = np.empty(r, np.bool_)
    one = np.uint64(1)
    sh = np.uint64(bit)
    keep = ~(one << sh)
    for i in range(r):
        x = a[i] or b[i]
        acc[i] = x
        if x:
            count[i] += 1
        if push:
            h[i, word] = (h[i, word] & keep) | (np.uint64(x) << sh)
    return acc


def sample_account(a, b, count, h, word: int, bit: int, push: bool) -> np.ndarray:
    """One IDT sampling interval (`IdtRegions.on_sample`) in one pass: acc = a | b
    (either page of a region accessed), count += acc in place and, with `push`, acc
    written in place as bit `bit` of word `word` of every ring buffer h ((R, words)
    uint64); returns acc."""
    return _sample_account(np.asarray(a, np.bool_), np.asarray(b, np.bool_),
                           count, h, int(word), int(bit), bool(push))


def _draw_pairs_numpy(u, s, e, out):
    u = u.reshape(2, s.shape[0])
    u *= (e - s).astype(float)
    p = u.astype(np.int64)
    p += s
    np.minimum(p, e - 1, out=p)
    out[:] = p.reshape(-1)


@kernel(numpy=_draw_pairs_numpy)
def _draw_pairs(u, s, e, out):
    # DAMON's damon_rand(start, end) twice per region: out[:R] then out[R:], from the
    # doubles u of g.random((2, R)) flattened
    r = s.shape[0]
    for k in range(2):
        for i in range(r):
            p = np.int64(u[k * r + i] * np.float64(e[i] - s[i])) + s[i]
            out[k * r + i] = min(p, e[i] - 1)


def draw_pairs(rng, s, e) -> np.ndarray:
    """Two uniform pages of each region [s[i], e[i]) (DAMON's damon_rand, twice), as
    `min(s + (rng.random((2, R)) * (e - s)).astype(int64), e - 1)` flattened: the same
    draws and operations, the arithmetic in one pass (a Generator passed to numba
    costs ~15 us a call in typing, more than the pass)."""
    out = np.empty(2 * s.shape[0], np.int64)
    _draw_pairs(rng.random(2 * s.shape[0]), s, e, out)
    return out
