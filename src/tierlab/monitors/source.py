"""Access sources: what the memory accesses of a workload look like to a monitor.

docs/model.md, "Rate field" and "Time". Every monitor primitive (accessed bits, PEBS
samples, NUMA hint faults) observes accesses through a filter, so it needs only four
questions answered about the access stream, which both sources here implement:

``accessed(a, b, t0, t1, rng) -> bool[]``
    was any page of [a, b) accessed during (t0, t1]? (t0 may be per entry)
``counts(a, b, t0, t1, rng) -> (reads, writes)``
    how many reads and writes did [a, b) receive during (t0, t1]?
``samples(t0, t1, period, which, rng, select=None) -> (pages, times)``
    PEBS-like: one sample every `period` events of kind `which` ("read", "write",
    "all"), counting only accesses to pages for which `select(pages)` is true;
``first_access(pages, t0, t1, rng) -> times``
    time of each page's first access after t0 (per page), nan if none by t1.

`RateSource` is the statistical model: accesses to page p form a Poisson process of
intensity rate_p * dW/dt, where the rate comes from the field epoch in force and W(t)
is the cumulative work of the `Timeline`. Everything is drawn from expectations:

- accessed: Bernoulli(1 - exp(-Lambda)), Lambda = expected accesses on the range;
- counts: independent Poisson(expected reads), Poisson(expected writes);
- samples: per field epoch Poisson(expected events / period) samples, pages drawn in
  proportion to their rate (`RateField.sample`), times spread in proportion to work
  done (uniform in work, mapped back through W^-1, so stalls get no samples);
  `select` thins them (a thinned Poisson process is Poisson again);
- first_access: the first event of a Poisson process is where the cumulative expected
  accesses Lambda_p(t0, t) reach an Exp(1) draw; solved epoch by epoch.

`ExactSource` replays an explicit per-access log (sorted times, pages, is-write flags),
the "exact replay" path for small traces; `poisson_events` generates such a log from a
rate field and work-time map. The statistical test in tests/test_model_vs_replay.py
checks that the two agree in distribution.

Known difference (by design): the rate model's PEBS sample total is Poisson (variance =
mean), whereas a real counter that samples exactly every period-th event gives
floor/ceil(N / period) (variance ~ mean / period + rounding). Per-page sample counts
agree (each page's samples are a thinning of its accesses); totals are over-dispersed
in the rate model.
"""
from __future__ import annotations

import bisect

import numpy as np

from ..engine.timeline import Timeline
from ..field import RateField
from .draws import (by_time, draw_accessed, draw_below, spend_budgets, sub_expected,
                    sub_expected_eps, table_min)
from ..structures import argsort_untied

_KINDS = ("read", "write", "all")


def _check_which(which: str) -> None:
    if which not in _KINDS:
        raise ValueError(f"which must be one of {_KINDS}, not {which!r}")


class AccessSource:
    """Interface shared by `RateSource` and `ExactSource` (see the module docstring).

    ``node_of``: optional callable pages -> node ids, used as the default page->node map
    by `PebsSampler`.
    """

    node_of = None

    @property
    def npages(self) -> int:
        raise NotImplementedError

    def accessed(self, a, b, t0, t1, rng) -> np.ndarray:
        raise NotImplementedError

    def accessed_pages(self, pages, t0: float, t1, rng) -> np.ndarray:
        """`accessed` of single pages cleared at one time t0 (a walk's, a sample's)."""
        pages = np.asarray(pages, dtype=np.int64)
        return self.accessed(pages, pages + 1, t0, t1, rng)

    def counts(self, a, b, t0, t1, rng):
        raise NotImplementedError

    def samples(self, t0, t1, period, which, rng, select=None):
        raise NotImplementedError

    def first_access(self, pages, t0, t1, rng, thresholds=None) -> np.ndarray:
        """First access time after t0 (per page) up to t1, nan if none.

        `thresholds` (rate model only): Exp(1) draws to use instead of fresh ones.
        """
        return self.first_access_lazy(pages, t0, t1, self._thresholds(rng, pages,
                                                                      thresholds))[0]

    def first_access_lazy(self, pages, t0, t1, remaining):
        """Continue a first-access search from t0 to t1 (hint faults poll this).

        `remaining` holds each page's unused Exp(1) budget (rate model; ignored by the
        exact source). Returns (times, remaining'): times nan where no access in
        (t0, t1]; remaining' = remaining - Lambda_p(t0, t1) for those pages, so a later
        call from t1 continues the same draw (consistent repeated polls).
        """
        raise NotImplementedError

    @staticmethod
    def _thresholds(rng, pages, thresholds):
        n = np.asarray(pages).shape[0]
        if thresholds is None:
            return rng.exponential(size=n)
        return np.asarray(thresholds, dtype=float)


# -----------------------------------------------------------------------------------
# Statistical model
# -----------------------------------------------------------------------------------
class _FieldTables:
    """Lookup tables of one RateField for fast vectorised range sums.

    A sentinel segment (start -1, length 0, rate 0) makes every page fall in some table
    row, so a prefix sum is one searchsorted, three gathers and three arithmetic ops.
    """

    __slots__ = ("field", "starts", "S", "L", "E", "rate", "cum")

    def __init__(self, f: RateField):
        self.field = f
        self.starts = f.starts
        lengths = (f.ends - f.starts).astype(float)
        self.S = np.concatenate(([-1.0], f.starts.astype(float)))
        self.L = np.concatenate(([0.0], lengths))
        self.E = np.concatenate(([-1], f.ends))
        self.rate, self.cum = {}, {}
        for kind, r in (("read", f.read), ("write", f.write), ("all", f.read + f.write)):
            self.rate[kind] = np.concatenate(([0.0], r))
            # row 0 is the sentinel; row i >= 1 is segment i-1, preceded by i-1 segments
            self.cum[kind] = np.concatenate(([0.0, 0.0], np.cumsum(r * lengths)[:-1])) \
                if len(r) else np.zeros(1)

    def prefix(self, x, kinds):
        """Sum of rates over pages [0, x) for each kind in `kinds`."""
        i = np.searchsorted(self.starts, x, side="right")
        inside = np.minimum(x - self.S[i], self.L[i])
        return [self.cum[k][i] + self.rate[k][i] * inside for k in kinds]

    def range_sum(self, a, b, kinds):
        x = np.concatenate((a, b))
        n = a.shape[0]
        return [c[n:] - c[:n] for c in self.prefix(x, kinds)]

    def page_rate(self, pages, kind="all"):
        i = np.searchsorted(self.starts, pages, side="right")
        return self.rate[kind][i] * (pages < self.E[i])  # pages >= start of row i


class RateSource(AccessSource):
    """Accesses drawn from the rate field via the timeline (the fast model).

    Range sums use per-field lookup tables (cached for the last few fields) and the
    epoch loop evaluates W(t0) once: W(max(t0, a)) = max(W(t0), W(a)) as W is
    non-decreasing. Cost per call: O(entries x field epochs overlapping the interval).
    """

    _CACHE = 64

    def __init__(self, timeline: Timeline, node_of=None):
        self.timeline = timeline
        self.node_of = node_of
        self._tables: dict[int, _FieldTables] = {}
        self._cats: dict = {}  # epochs' tables concatenated (`_concat`)

    @property
    def npages(self) -> int:
        return self.timeline.field.npages

    def _concat(self, tabs):
        """The tables' starts, offsets, rates and ends concatenated for
        `draws.sub_expected_eps` (the last few sets kept: the CLOCK hands ask with
        the same epochs pass after pass)."""
        key = tuple(id(t) for t in tabs)
        hit = self._cats.get(key)
        if hit is not None and all(a is b for a, b in zip(hit[0], tabs)):
            return hit[1]
        cat = (np.concatenate([t.starts for t in tabs]),
               np.cumsum([0] + [t.starts.shape[0] for t in tabs]).astype(np.int64),
               np.concatenate([t.rate["all"] for t in tabs]),
               np.concatenate([t.E for t in tabs]))
        if len(self._cats) >= 4:
            self._cats.pop(next(iter(self._cats)))
        self._cats[key] = (tabs, cat)
        return cat

    def _tab(self, f: RateField) -> _FieldTables:
        t = self._tables.get(id(f))
        if t is None or t.field is not f:
            if len(self._tables) >= self._CACHE:
                self._tables.pop(next(iter(self._tables)))
            t = self._tables[id(f)] = _FieldTables(f)
        return t

    def _epochs(self, t0, t1: float):
        """[(tables, wlo, dw)]: work done under each field epoch during (t0, t1];
        wlo and dw are arrays shaped like t0 (or scalars)."""
        tl = self.timeline
        t0 = np.asarray(t0, dtype=float)
        tmin = float(t0.min()) if t0.ndim else float(t0)
        starts = tl.epoch_start
        nep = len(starts)
        if t0.ndim and t0.size > 1 and tmin == float(t0.max()):
            t0 = t0.reshape(-1)[:1]  # one start time: one lookup, broadcast by the callers
        w_t0 = tl.work_at(t0)
        out = []
        for k in range(nep):
            a = starts[k]
            b = starts[k + 1] if k + 1 < nep else np.inf
            if b <= tmin or a >= t1:
                continue
            wlo = np.maximum(w_t0, tl.work_at(a)) if a > tmin else w_t0
            whi = float(tl.work_at(min(t1, b)))
            out.append((self._tab(tl.fields[k]), wlo, np.maximum(whi - wlo, 0.0)))
        return out

    def _expected(self, a, b, t0, t1, kinds):
        a = np.atleast_1d(np.asarray(a, dtype=np.int64))
        b = np.broadcast_to(np.asarray(b, dtype=np.int64), a.shape)
        out = [np.zeros(a.shape) for _ in kinds]
        if a.size == 0:
            return out
        for tab, _, dw in self._epochs(t0, t1):
            if not np.any(dw > 0):
                continue
            if np.all(b - a == 1):
                sums = [tab.page_rate(a, k) for k in kinds]
            else:
                sums = tab.range_sum(a, b, kinds)
            for o, s in zip(out, sums):
                o += s * dw
        return out

    def expected(self, a, b, t0, t1):
        """Expected (reads, writes) on [a, b) during (t0, t1] (t0 may be per entry)."""
        return tuple(self._expected(a, b, t0, t1, ("read", "write")))

    def accessed(self, a, b, t0, t1, rng) -> np.ndarray:
        (lam,) = self._expected(a, b, t0, t1, ("all",))
        return rng.random(lam.shape) < -np.expm1(-lam)

    def counts(self, a, b, t0, t1, rng):
        r, w = self._expected(a, b, t0, t1, ("read", "write"))
        return rng.poisson(r), rng.poisson(w)

    def accessed_pages(self, pages, t0: float, t1, rng) -> np.ndarray:
        """One clear time: `accessed_table` with a table of one value, the same bits."""
        pages = np.asarray(pages)
        return self.accessed_table(pages, np.zeros(pages.shape[0], np.uint8),
                                   np.array([float(t0)]), t1, rng, tmin=float(t0))

    #: pages per pass of `accessed_table`: its two 8-byte buffers stay in a core's L2
    #: cache between the passes (bench_memsim's nimble: 13.1 s CPU with 2^22, 10.4 s
    #: with 2^16; the draws are the same stream in any chunking)
    TABLE_CHUNK = 1 << 16

    def draw_tables(self, since_tab, tmin: float, t1: float):
        """What the compiled draws (`draws.draw_accessed`, `lru.lru_sweep`) take
        for pages whose start times are `since_tab`'s values, the least of them at or
        after `tmin`, up to t1: (W of each start time, (starts, offsets, rates, ends,
        W(epoch start), use it, W(epoch end), several epochs)) for the field epochs
        from the one holding tmin on (the earlier ones end before every start); None
        where no epoch begins before t1. An earlier tmin adds epochs that add nothing
        (each page's work in them is max(W(end) - W(t0), 0) = 0): the same bits."""
        tl = self.timeline
        starts = tl.epoch_start
        eps = []  # (tables, W(epoch start), use it, W(end)) as `_epochs` finds them
        for k in range(max(bisect.bisect_right(starts, tmin) - 1, 0), len(starts)):
            a = starts[k]
            b = starts[k + 1] if k + 1 < len(starts) else np.inf
            if a >= t1:
                break
            eps.append((self._tab(tl.fields[k]), float(tl.work_at(a)), a > tmin,
                        float(tl.work_at(min(t1, b)))))
        if not eps:
            return None
        w_tab = np.asarray(tl.work_at(np.asarray(since_tab, dtype=float)), dtype=float)
        per_ep = (np.array([e[1] for e in eps]), np.array([e[2] for e in eps]),
                  np.array([e[3] for e in eps]))
        if len(eps) == 1:
            t = eps[0][0]
            return w_tab, (t.starts, np.zeros(2, np.int64), t.rate["all"], t.E, *per_ep,
                           False)
        return w_tab, (*self._concat(tuple(e[0] for e in eps)), *per_ep, True)

    def accessed_table(self, pages, which, since_tab, t1, rng, by_page=False,
                       tmin=None) -> np.ndarray:
        """`accessed(pages, pages + 1, since_tab[which], t1, rng)` for start times that
        are few distinct values (`since_tab`, indexed by `which`, or with `by_page` by
        `which[pages]`, an array over all pages): W(t0) is looked up
        once per value, the expected accesses summed and drawn against in one
        compiled pass that draws the generator's PCG64 stream itself
        (`draws.draw_accessed`), or, for another generator or without numba, summed
        by a compiled pass (`draws.sub_expected`) and drawn in chunks of the same
        stream: the same bits either way, with O(chunk) temporaries. `tmin`: the earliest
        start time of these pages, min(since_tab[which]), if the caller knows it."""
        pages = np.asarray(pages)
        which = np.asarray(which)
        n = pages.shape[0]
        out = np.zeros(n, dtype=bool)
        if n == 0:
            return out
        since_tab = np.asarray(since_tab, dtype=float)
        if tmin is None:
            tmin = table_min(pages, which, by_page, since_tab)
        got = self.draw_tables(since_tab, tmin, t1)
        if got is not None and draw_accessed(out, rng, pages, which, by_page, *got):
            return out
        step = min(self.TABLE_CHUNK, n)
        # reused: no fresh pages per chunk
        lam_buf, u_buf = np.empty(step), np.empty(step)
        for c in range(0, n, step):
            lam, u = lam_buf[:min(step, n - c)], u_buf[:min(step, n - c)]
            ws = which if by_page else which[c:c + step]
            if got is None:
                lam[:] = 0.0
            elif not got[1][-1]:  # one epoch: -lam, summed negated
                starts, _, rate, ends, w_a, use_max, whi, _ = got[1]
                sub_expected(lam, pages[c:c + step], ws, by_page, got[0], starts, rate,
                             ends, w_a[0], use_max[0], whi[0], init=True)
            else:  # every epoch in one pass
                sub_expected_eps(lam, pages[c:c + step], ws, by_page, got[0], got[1][:4],
                                 *got[1][4:7])
            rng.random(out=u)
            draw_below(u, lam, out[c:c + step])  # u < -expm1(-lam) = 1 - exp(-lam)
        return out

    def samples(self, t0, t1, period, which, rng, select=None):
        _check_which(which)
        tl = self.timeline
        pages, works = [], []
        for f, w0, w1 in tl.epochs(float(t0), float(t1)):
            w0, w1 = float(w0), float(w1)
            tot = {"read": f.total_read, "write": f.total_write, "all": f.total}[which]
            mean = tot * (w1 - w0) / period
            if mean <= 0:
                continue
            n = int(rng.poisson(mean))
            if n == 0:
                continue
            pages.append(f.sample(rng, n, which))
            works.append(w0 + rng.random(n) * (w1 - w0))
        if not pages:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        pages = np.concatenate(pages)
        works = np.concatenate(works)
        if select is not None:
            keep = np.asarray(select(pages), dtype=bool)
            pages, works = pages[keep], works[keep]
        got = by_time(works, *tl.breakpoints())
        if got is None:
            order, times = argsort_untied(tl.time_at_work(works))  # times rarely tie
        else:
            order, times = got
        return pages[order], np.clip(times, t0, t1)

    def first_access_lazy(self, pages, t0, t1, remaining, cache=None, inplace=False,
                          sparse=False):
        """`cache`: an optional dict the caller keeps with `pages` (cleared when they
        change); it holds the pages' rates under the last field seen, so repeated polls
        of the same armed pages skip the per-page segment search. `t0` may be one time
        for every page. `inplace`: `remaining` (float64) is updated in place and
        returned, for a caller that replaces it anyway. `sparse`: return (indexes of
        the pages hit, ascending; their times; remaining) instead of a time per page."""
        tl = self.timeline
        pages = np.asarray(pages, dtype=np.int64)
        n = pages.shape[0]
        if inplace and isinstance(remaining, np.ndarray) and remaining.dtype == float:
            rem = remaining.reshape(n)
        else:
            rem = np.array(remaining, dtype=float, copy=True).reshape(n)
        t0 = np.asarray(t0, dtype=float)
        if sparse:
            times = np.empty(0)
        else:
            times = np.full(n, np.nan)
        if n == 0:
            return (np.zeros(0, np.int64), times, rem) if sparse else (times, rem)
        done = []
        for tab, wlo, dw in self._epochs(t0, float(t1)):
            if cache is not None and cache.get("tab") is tab and cache.get("n") == n:
                rate = cache["rate"]
            else:
                rate = tab.page_rate(pages)
                if cache is not None:
                    cache.update(tab=tab, rate=rate, n=n)
            # pages done in an earlier epoch hold rem = inf meanwhile, so they are not
            # hit again (one compiled pass: `draws.spend_budgets`)
            hit, left = spend_budgets(rate, dw, rem)
            if hit.shape[0]:
                w = np.broadcast_to(wlo, (n,))[hit]
                done.append((hit, tl.time_at_work(w + left / rate[hit])))
        if not done:
            return (np.zeros(0, np.int64), times, rem) if sparse else (times, rem)
        hit = np.concatenate([h for h, _ in done])
        ht = np.concatenate([t for _, t in done])
        rem[hit] = 0.0
        ht = np.clip(ht, np.broadcast_to(t0, (n,))[hit], t1)
        if not sparse:
            times[hit] = ht
            return times, rem
        if len(done) > 1:
            o = np.argsort(hit, kind="stable")
            hit, ht = hit[o], ht[o]
        return hit, ht, rem


# -----------------------------------------------------------------------------------
# Exact replay
# -----------------------------------------------------------------------------------
def _range_max(values, lo, hi, empty=-np.inf):
    """max(values[lo[i]:hi[i]]) for each i (empty ranges give `empty`), vectorised."""
    lo = np.asarray(lo, dtype=np.int64)
    hi = np.asarray(hi, dtype=np.int64)
    out = np.full(lo.shape, empty, dtype=float)
    nonempty = hi > lo
    if values.size == 0 or not nonempty.any():
        return out
    padded = np.concatenate((values, [empty]))
    idx = np.empty(2 * int(nonempty.sum()), dtype=np.int64)
    idx[0::2] = lo[nonempty]
    idx[1::2] = hi[nonempty]
    red = np.maximum.reduceat(padded, idx)
    out[nonempty] = red[0::2]
    return out


class ExactSource(AccessSource):
    """An explicit per-access event log: `times` (sorted), `pages`, `writes` (bool).

    Event semantics match the rate model's: an access at time t is "during (t0, t1]"
    iff t0 < t <= t1. All queries are vectorised (binary searches, sorts over the
    events of the queried window); meant for small traces (up to ~10^7 events).
    """

    def __init__(self, times, pages, writes, npages: int | None = None, node_of=None):
        times = np.asarray(times, dtype=float)
        pages = np.asarray(pages, dtype=np.int64)
        writes = np.asarray(writes, dtype=bool)
        if not (times.shape == pages.shape == writes.shape) or times.ndim != 1:
            raise ValueError("times, pages and writes must be 1-D arrays of equal length")
        if times.size and np.any(np.diff(times) < 0):
            order = np.argsort(times, kind="stable")
            times, pages, writes = times[order], pages[order], writes[order]
        self.times, self.pages, self.writes = times, pages, writes
        self._npages = int(npages) if npages is not None else \
            (int(pages.max()) + 1 if pages.size else 0)
        self.node_of = node_of
        # page-major copy (time-sorted within a page) for first_access
        order = np.argsort(pages, kind="stable")
        self._pp = pages[order]
        self._pt = times[order]

    @classmethod
    def from_timeline(cls, timeline, t0, t1, rng, max_events: int = 10 ** 7,
                      node_of=None) -> "ExactSource":
        """A Poisson access stream drawn from `timeline` over (t0, t1] (`poisson_events`)."""
        times, pages, writes = poisson_events(timeline, t0, t1, rng, max_events)
        f = timeline if isinstance(timeline, RateField) else timeline.field
        return cls(times, pages, writes, npages=f.npages, node_of=node_of)

    def __len__(self) -> int:
        return self.times.shape[0]

    @property
    def npages(self) -> int:
        return self._npages

    # -- helpers ------------------------------------------------------------------
    def _window(self, t0, t1):
        """Slice of the time-sorted log holding events with t0 < t <= t1."""
        i0 = np.searchsorted(self.times, t0, side="right")
        i1 = np.searchsorted(self.times, t1, side="right")
        return slice(int(i0), int(max(i1, i0)))

    @staticmethod
    def _kind_mask(writes, which):
        if which == "read":
            return ~writes
        if which == "write":
            return writes
        return np.ones(writes.shape, dtype=bool)

    # -- queries ------------------------------------------------------------------
    def accessed(self, a, b, t0, t1, rng=None) -> np.ndarray:
        a = np.atleast_1d(np.asarray(a, dtype=np.int64))
        b = np.atleast_1d(np.asarray(b, dtype=np.int64))
        t0 = np.broadcast_to(np.asarray(t0, dtype=float), a.shape)
        if a.size == 0:
            return np.zeros(0, dtype=bool)
        sl = self._window(float(t0.min()), float(t1))
        wp = self.pages[sl]
        wt = self.times[sl]
        order = np.argsort(wp, kind="stable")
        wp, wt = wp[order], wt[order]
        lo = np.searchsorted(wp, a, side="left")
        hi = np.searchsorted(wp, b, side="left")
        last = _range_max(wt, lo, hi)  # latest access in the range within the window
        return last > t0

    def counts(self, a, b, t0, t1, rng=None):
        a = np.atleast_1d(np.asarray(a, dtype=np.int64))
        b = np.atleast_1d(np.asarray(b, dtype=np.int64))
        t0 = np.broadcast_to(np.asarray(t0, dtype=float), a.shape)
        reads = np.zeros(a.shape, dtype=np.int64)
        writes = np.zeros(a.shape, dtype=np.int64)
        # one pass per distinct t0 (a scalar t0 is one pass)
        uniq, inv = np.unique(t0, return_inverse=True)
        for k, tk in enumerate(uniq):
            sel = np.flatnonzero(inv == k)
            sl = self._window(float(tk), float(t1))
            wp, ww = self.pages[sl], self.writes[sl]
            for kind, out in ((~ww, reads), (ww, writes)):
                p = np.sort(wp[kind])
                out[sel] = np.searchsorted(p, b[sel], "left") - np.searchsorted(p, a[sel],
                                                                                "left")
        return reads, writes

    def samples(self, t0, t1, period, which, rng, select=None):
        """Every `period`-th event of kind `which` (after `select`), random phase."""
        _check_which(which)
        sl = self._window(float(t0), float(t1))
        p, t, w = self.pages[sl], self.times[sl], self.writes[sl]
        m = self._kind_mask(w, which)
        p, t = p[m], t[m]
        if select is not None:
            keep = np.asarray(select(p), dtype=bool)
            p, t = p[keep], t[keep]
        period = int(period)
        if period < 1:
            raise ValueError("period must be >= 1")
        phase = int(rng.integers(period))
        idx = np.arange(phase, p.shape[0], period)
        return p[idx], t[idx]

    def first_access(self, pages, t0, t1, rng=None, thresholds=None) -> np.ndarray:
        """First event on each page in (t0, t1] (t0 per page), nan if none."""
        return self.first_access_lazy(pages, t0, t1)[0]

    def first_access_lazy(self, pages, t0, t1, remaining=None):
        pages = np.asarray(pages, dtype=np.int64)
        n = pages.shape[0]
        t0 = np.broadcast_to(np.asarray(t0, dtype=float), (n,))
        lo = np.searchsorted(self._pp, pages, side="left")
        hi = np.searchsorted(self._pp, pages, side="right")
        end = hi.copy()
        # vectorised binary search: first index in [lo, hi) with time > t0
        pt = self._pt
        act = lo < hi
        while act.any():
            mid = (lo + hi) // 2
            le = np.zeros(n, dtype=bool)
            le[act] = pt[mid[act]] <= t0[act]
            lo = np.where(act & le, mid + 1, lo)
            hi = np.where(act & ~le, mid, hi)
            act = lo < hi
        times = np.full(n, np.nan)
        ok = lo < end
        if ok.any():
            cand = pt[lo[ok]]
            times[ok] = np.where(cand <= t1, cand, np.nan)
        rem = np.zeros(n) if remaining is None else np.asarray(remaining, dtype=float)
        return times, rem


# -----------------------------------------------------------------------------------
# Exact Poisson stream from a rate field
# -----------------------------------------------------------------------------------
def poisson_events(timeline, t0: float, t1: float, rng: np.random.Generator,
                   max_events: int = 10 ** 7):
    """An exact Poisson access stream over (t0, t1]: (times, pages, writes), time-sorted.

    `timeline` is a `Timeline` (rate field epochs + cumulative work W(t)) or a bare
    `RateField`, taken as one field with W(t) = t (one unit of work per second).
    Page p's reads form a Poisson process of intensity read_p * dW/dt (writes alike):
    per epoch and segment, the count is Poisson(rate * pages * work), pages are uniform
    in the segment and work uniform in the epoch's work interval, mapped to time through
    W^-1. Vectorised over segments and events; raises if the expected number of events
    exceeds `max_events` (exact streams are for small cases).
    """
    if isinstance(timeline, RateField):
        f = timeline
        epochs = [(f, np.asarray(float(t0)), np.asarray(float(t1)))]
        to_time = lambda w: w  # noqa: E731
    else:
        epochs = timeline.epochs(float(t0), float(t1))
        to_time = timeline.time_at_work
    expected = sum(f.total * max(float(w1) - float(w0), 0.0) for f, w0, w1 in epochs)
    if expected > max_events:
        raise ValueError(f"exact stream would hold ~{expected:.3g} events "
                         f"(> max_events={max_events}); use the rate model")
    T, P, Wr = [], [], []
    for f, w0, w1 in epochs:
        w0, w1 = float(w0), float(w1)
        dw = w1 - w0
        if dw <= 0 or f.nsegments == 0:
            continue
        lengths = (f.ends - f.starts).astype(float)
        for rate, is_write in ((f.read, False), (f.write, True)):
            k = rng.poisson(rate * lengths * dw)
            tot = int(k.sum())
            if tot == 0:
                continue
            seg = np.repeat(np.arange(f.nsegments), k)
            lo = f.starts[seg]
            P.append(lo + (rng.random(tot) * (f.ends[seg] - lo)).astype(np.int64))
            T.append(w0 + rng.random(tot) * dw)
            Wr.append(np.full(tot, is_write))
    if not T:
        return np.zeros(0), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool)
    times = np.asarray(to_time(np.concatenate(T)), dtype=float)
    pages = np.concatenate(P)
    writes = np.concatenate(Wr)
    order = np.argsort(times, kind="stable")
    times = np.clip(times[order], t0, t1)
    return times, pages[order], writes[order]
