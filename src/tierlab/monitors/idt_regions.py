"""`idt-regions`: IDT's region monitor (HPDC'24; ALGORITHMS.md "IDT", Monitoring).

Built on DAMON (`damon.py`: regions over the allocated address space, min/max regions,
the prepare/check accessed-bit pattern) with IDT's changes:

- sampling interval 10 ms, aggregation 1 s, 1,000-10,000 regions;
- **two** random pages per region per sampling interval; `nr_accesses` counts the
  intervals in which either was accessed. With the rate model both pages are fresh
  uniform draws, so per interval the pair is (both, one, none) accessed with
  probabilities (q^2, 2q(1 - q), (1 - q)^2), q the region's mean page access
  probability (the same mixture argument as DAMON's single sample);
- `age` by DAMON's rule (+1 per aggregation, 0 when nr_accesses moved by more than
  max_nr_accesses / 10), size-weighted on merge, kept by both halves on split;
- an access-history bit vector per region (`history_bits`, default 64; the paper does not
  publish its length or fill rule: here bit 0 is 1 iff nr_accesses > 0 in the last
  aggregation, older bits shift left);
- **merge** of neighbours only when they are on the same node (a region's node is its
  middle page's) and, in every sliding window of `window` (16) valid history bits,
  Fisher's exact test on [[a_i, n - a_i], [a_j, n - a_j]] does not reject similarity
  at `fisher_alpha` (10%, the 90% level); the table is computed once with scipy. The
  public code's rule, |a_i - a_j| <= 2 per window, is `merge_rule=public`. Merged
  runs are formed from neighbour pairs (chained) and capped at DAMON's size limit;
  a run keeps its first region's history and last_nr_accesses;
- **split** of a region whose two samples disagreed (one accessed, the other not) in at
  least `split_min` intervals of the aggregation, in two at a random page, most
  disagreeing first, while fewer than max_nr_regions regions exist (DAMON's random
  split is not used);
- `reset_after_move(idx)` zeroes age and nr_accesses of migrated regions (IDT's rule).

`stats()` adds `mean_merged_hamming`: the mean normalised Hamming distance between the
histories of regions merged together (the paper's measure of merge quality).
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..errors import TierlabError
from .base import MONITORS
from .damon import UNALLOC, Damon, Regions, _i64, hamming


@dataclass
class IdtRegionSnapshot(Regions):
    """DAMON's region snapshot plus the access history (uint64 per region)."""

    history: np.ndarray = None


@lru_cache(maxsize=None)
def fisher_similar_table(n: int, alpha: float) -> np.ndarray:
    """(n+1, n+1) bool: counts a, b of n trials are similar iff Fisher's exact test
    (two-sided) on [[a, n-a], [b, n-b]] gives p >= alpha. Computed once per (n, alpha)."""
    from scipy.stats import fisher_exact
    t = np.ones((n + 1, n + 1), dtype=bool)
    for a in range(n + 1):
        for b in range(a + 1, n + 1):
            p = fisher_exact([[a, n - a], [b, n - b]]).pvalue
            t[a, b] = t[b, a] = p >= alpha
    t.flags.writeable = False
    return t


def public_similar_table(n: int) -> np.ndarray:
    """The public code's lookup table: |a - b| <= 2."""
    a = np.arange(n + 1)
    return np.abs(a[:, None] - a[None, :]) <= 2


def window_counts(h: np.ndarray, valid: int, window: int) -> np.ndarray:
    """(R, W): accessed bits in every sliding window of `window` bits over the `valid`
    newest bits of each history (one window of `valid` bits if valid < window)."""
    h = np.asarray(h, dtype=np.uint64)
    w = min(window, valid)
    mask = np.uint64((1 << w) - 1)
    offs = range(0, valid - w + 1)
    return np.stack([np.bitwise_count((h >> np.uint64(k)) & mask) for k in offs],
                    axis=1).astype(np.int64)


@MONITORS.register("idt-regions")
class IdtRegions(Damon):
    """IDT's region monitor: two samples per region, Fisher-test merge, history."""

    def __init__(self, sample="10ms", aggr="1s", update="1s", min_nr_regions=1000,
                 max_nr_regions=10000, history_bits=64, window=16, fisher_alpha=0.10,
                 merge_rule="fisher", split_min=1, target=None, name="idt-regions"):
        super().__init__(sample=sample, aggr=aggr, update=update,
                         min_nr_regions=min_nr_regions, max_nr_regions=max_nr_regions,
                         target=target, name=name)
        self.params.update(history_bits=history_bits, window=window,
                           fisher_alpha=fisher_alpha, merge_rule=merge_rule,
                           split_min=split_min)
        self.history_bits = int(history_bits)
        self.window = int(window)
        if not 1 <= self.window <= self.history_bits <= 64:
            raise TierlabError(f"bad idt-regions history_bits={history_bits} "
                               f"window={window}: need 1 <= window <= history_bits <= 64")
        self.fisher_alpha = float(fisher_alpha)
        if merge_rule not in ("fisher", "public"):
            raise TierlabError(f"bad idt-regions merge_rule {merge_rule!r}; valid: "
                               "fisher, public")
        self.merge_rule = merge_rule
        self.split_min = max(int(split_min), 1)
        self._hist = np.zeros(0, dtype=np.uint64)
        self._hist_s = np.zeros(0, dtype=np.int64)  # region starts the history matches
        self._dis = np.zeros(0, dtype=np.int64)
        self._snap_hist = self._hist
        self.merges = 0
        self._ham_sum = 0.0

    # -- history kept aligned with the regions --------------------------------------
    def _sync(self) -> None:
        """Regions changed under the base class (allocation updates, min_nr_regions):
        each new region takes the history of the old region holding its start."""
        if self._hist_s.shape == self._s.shape and np.array_equal(self._hist_s, self._s):
            return
        old_s, old_h = self._hist_s, self._hist
        if old_s.size:
            i = np.clip(np.searchsorted(old_s, self._s, side="right") - 1, 0, None)
            h = old_h[i]
        else:
            h = np.zeros(self._s.shape, dtype=np.uint64)
        self._hist, self._hist_s = h, self._s

    def _set_hist(self, h) -> None:
        self._hist, self._hist_s = np.asarray(h, dtype=np.uint64), self._s

    @property
    def regions(self) -> IdtRegionSnapshot:
        self._sync()
        r = super().regions
        h = self._hist if (self._in_aggr or self._snap is None) else self._snap_hist
        return IdtRegionSnapshot(r.start, r.end, r.nr_accesses, r.age, r.last_nr_accesses,
                                 history=h)

    def reset_after_move(self, idx) -> None:
        """IDT zeroes age and nr_accesses of a region after migrating it."""
        idx = np.asarray(idx, dtype=np.int64)
        self.reset_age(idx)
        nr = self._nr.copy()
        nr[idx] = 0
        self._nr = nr

    # -- sampling ----------------------------------------------------------------------
    def _pair_probs(self, lo, hi):
        """(pa, pb), each (R, S): access probability of the two sampled pages."""
        tl = self.sim.source.timeline
        S, R = self.samples_per_aggr, self.nr_regions
        w = tl.work_at(np.concatenate((lo, hi)))
        dw = np.maximum(w[S:] - w[:S], 0.0)
        if tl.epoch_start[-1] <= float(lo.min()) and \
                tl.fields[-1].nsegments <= max(20 * R, 20000):
            q = self._mean_access_prob(tl.fields[-1], dw)  # fresh uniform pages
            q = np.broadcast_to(q, (R, S))
            return q, q
        out = []
        for _ in range(2):
            pages = self._draw_pages(np.arange(R))
            r, wr = tl.field.rate_of(pages.ravel())
            out.append(-np.expm1(-(r + wr).reshape(pages.shape) * dw[None, :]))
        return out[0], out[1]

    def _sample(self, t0: float, t1: float) -> np.ndarray:
        sim = self.sim
        S, R = self.samples_per_aggr, self.nr_regions
        grid = t0 + self._unit_grid * (t1 - t0)
        grid[-1] = t1
        if hasattr(getattr(sim.source, "timeline", None), "fields"):
            pa, pb = self._pair_probs(grid[:-1], grid[1:])
            a = self.rng.random((R, S)) < pa
            b = self.rng.random((R, S)) < pb
        else:  # exact replay source: a prepare/check of each drawn page
            a, b = (np.stack([sim.bits.test_since(0, p[:, j], grid[j], float(grid[j + 1]))
                              for j in range(S)], axis=1)
                    for p in (self._draw_pages(np.arange(R)), self._draw_pages(np.arange(R))))
        self._dis = (a ^ b).sum(axis=1).astype(np.int64)
        n = 2 * R * S  # two pages, each a prepare (clear) and a check
        cost = getattr(sim.bits, "check_cost", 150e-9)
        sim.bits.charge(2 * n)
        self.checks += 2 * n
        self.cpu_seconds += 2 * n * cost
        sim.charge_cpu(2 * n * cost, "monitor")
        return (a | b).sum(axis=1).astype(np.int64)

    # -- aggregation ---------------------------------------------------------------
    def _similar(self, h, valid: int) -> np.ndarray:
        """similar[i]: regions i and i+1 pass the test in every window."""
        if valid == 0 or h.shape[0] < 2:
            return np.ones(max(h.shape[0] - 1, 0), dtype=bool)
        n = min(self.window, valid)
        table = (fisher_similar_table(n, self.fisher_alpha) if self.merge_rule == "fisher"
                 else public_similar_table(n))
        c = window_counts(h, valid, self.window)
        return table[c[:-1], c[1:]].all(axis=1)

    def _merge(self) -> None:
        s, e, nr, last, age, h = self._s, self._e, self._nr, self._last, self._age, self._hist
        R = s.shape[0]
        if R < 2:
            return
        node = self.sim.mem.node[(s + e - 1) // 2]
        valid = min(self.nr_aggregations, self.history_bits)
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
        self._ham_sum += float(hamming(h[merged], h[first][run[merged]]).sum()) / \
            max(valid, 1)
        tot = np.bincount(run, weights=sz)
        self._nr = (np.bincount(run, weights=nr * sz) // tot).astype(np.int64)
        self._age = (np.bincount(run, weights=age * sz) // tot).astype(np.int64)
        lastidx = np.append(first[1:] - 1, R - 1)
        self._s, self._e, self._last = s[first], e[lastidx], last[first]
        self._dis = np.bincount(run, weights=self._dis).astype(np.int64)
        self._set_hist(h[first])

    def aggregate(self, nr_accesses, now: float = 0.0) -> None:
        """Age rule, history, IDT merge, subscribers (IDT's policy), reset, IDT split."""
        self._sync()
        nr = np.minimum(_i64(nr_accesses), self.max_nr_accesses)
        if nr.shape != self._s.shape:
            raise ValueError("nr_accesses must have one value per region")
        if self._dis.shape != nr.shape:
            self._dis = np.zeros_like(nr)
        self.nr_aggregations += 1
        self.max_observed = int(nr.max()) if nr.size else 0
        thres = self.max_nr_accesses // 10
        self._age = np.where(np.abs(nr - self._last) > thres, 0, self._age + 1)
        self._nr = nr
        mask = np.uint64((1 << self.history_bits) - 1) if self.history_bits < 64 \
            else np.uint64(0xFFFFFFFFFFFFFFFF)
        self._set_hist(((self._hist << np.uint64(1)) | (nr > 0).astype(np.uint64)) & mask)
        self._merge()
        self._publish(now)
        self._snap_hist = self._hist
        self._split_disagreeing()

    def _split_disagreeing(self) -> None:
        room = self.max_nr_regions - self.nr_regions
        s, e = self._s, self._e
        cand = np.flatnonzero((self._dis >= self.split_min) & (e - s >= 2))
        if room <= 0 or cand.size == 0:
            return
        cand = cand[np.argsort(-self._dis[cand], kind="stable")][:room]
        cut = s[cand] + 1 + (self.rng.random(cand.size) * (e[cand] - s[cand] - 1)).astype(
            np.int64)
        owner = np.sort(np.concatenate((np.arange(s.size), cand)))
        new_s = s[owner].copy()
        dup = np.concatenate(([False], owner[1:] == owner[:-1]))
        cuts = np.empty(s.size, dtype=np.int64)
        cuts[cand] = cut
        new_s[dup] = cuts[owner[dup]]
        new_e = e[owner].copy()
        new_e[np.flatnonzero(dup) - 1] = new_s[dup]
        self._s, self._e = new_s, new_e
        self._nr, self._last, self._age = self._nr[owner], self._last[owner], self._age[owner]
        self._set_hist(self._hist[owner])
        self._dis = np.zeros(new_s.size, dtype=np.int64)

    def stats(self) -> dict:
        d = super().stats()
        d["merges"] = self.merges
        d["mean_merged_hamming"] = self._ham_sum / self.merges if self.merges else None
        return d
