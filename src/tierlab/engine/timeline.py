"""Progress over simulated time: how much work was done when, under which rate field.

The engine advances in steps during which throughput is constant, so cumulative work
W(t) is piecewise linear; stalls are flat pieces (no accesses). Monitors turn work into
expected accesses: page p receives rate_p * (W(t1) - W(t0)) accesses in [t0, t1] while
one field holds (exact in distribution for Poisson access streams).
"""
from __future__ import annotations

import bisect

import numpy as np

from ..field import RateField


class Timeline:
    """Breakpoints (t, W) of cumulative work, and the field epochs over time.

    History older than `horizon` seconds is dropped (monitors look back at most one
    aggregation interval or an accessed-bit clear horizon).
    """

    def __init__(self, field: RateField, horizon: float = 600.0):
        self.horizon = horizon
        self._tb = np.zeros(8192)  # breakpoints live in [0, _n) of these buffers
        self._wb = np.zeros(8192)
        self._n = 1
        self.epoch_start = [0.0]  # start time of each field epoch
        self.fields = [field]

    # -- recording (engine) -------------------------------------------------------
    def advance(self, t: float, work: float) -> None:
        """Record that cumulative work is `work` at time `t` (t never decreases)."""
        n = self._n
        last = self._tb[n - 1]
        if t < last:
            raise ValueError("time went backwards")
        if t == last:
            self._wb[n - 1] = work
            return
        if n == len(self._tb):  # full: drop what is older than the horizon, or grow
            cut = max(int(np.searchsorted(self._tb[:n], t - self.horizon)) - 1, 0)
            size = len(self._tb) * (1 if cut >= n // 2 else 2)
            tb, wb = np.zeros(size), np.zeros(size)
            tb[:n - cut], wb[:n - cut] = self._tb[cut:n], self._wb[cut:n]
            self._tb, self._wb, n = tb, wb, n - cut
        self._tb[n] = t
        self._wb[n] = work
        self._n = n + 1

    def set_field(self, t: float, field: RateField) -> None:
        if t == self.epoch_start[-1]:
            self.fields[-1] = field
        else:
            self.epoch_start.append(t)
            self.fields.append(field)
        while len(self.epoch_start) > 2 and t - self.epoch_start[1] > self.horizon:
            del self.epoch_start[0]
            del self.fields[0]

    # -- queries (monitors) -------------------------------------------------------
    @property
    def now(self) -> float:
        return float(self._tb[self._n - 1])

    @property
    def field(self) -> RateField:
        return self.fields[-1]

    def _arrays(self):
        return self._tb[:self._n], self._wb[:self._n]

    def breakpoints(self):
        """(t, W) arrays of the kept breakpoints (views, valid until the next advance)."""
        return self._arrays()

    def work_at(self, t) -> np.ndarray:
        """Cumulative work at time(s) t (clamped to the recorded history)."""
        ta, wa = self._arrays()
        return np.interp(t, ta, wa)

    def time_at_work(self, w) -> np.ndarray:
        """Earliest time at which cumulative work reached w (inverse of work_at)."""
        ta, wa = self._arrays()
        w = np.asarray(w, dtype=float)
        i = np.searchsorted(wa, w, side="left")
        i = np.clip(i, 1, len(wa) - 1)
        w0, w1 = wa[i - 1], wa[i]
        t0, t1 = ta[i - 1], ta[i]
        frac = np.where(w1 > w0, (w - w0) / np.where(w1 > w0, w1 - w0, 1.0), 0.0)
        out = t0 + np.clip(frac, 0.0, 1.0) * (t1 - t0)
        return np.where(w <= wa[0], ta[0], out)

    def epochs(self, t0, t1):
        """[(field, w0, w1)] for each field epoch overlapping [t0, t1]; w0/w1 are arrays
        of the cumulative work at the overlap's ends (t0 may be an array)."""
        t0 = np.asarray(t0, dtype=float)
        out = []
        starts = self.epoch_start
        tmin = float(np.min(t0))
        # the epochs from the one holding tmin to the last starting before t1 (bisect:
        # a long run's history has thousands of epochs and is asked at every event):
        # each ends after tmin and starts before t1
        k0 = max(bisect.bisect_right(starts, tmin) - 1, 0)
        k1 = bisect.bisect_left(starts, t1)
        for k in range(k0, min(k1, len(self.fields))):
            f = self.fields[k]
            a = starts[k]
            b = starts[k + 1] if k + 1 < len(starts) else np.inf
            lo = np.maximum(t0, a)
            hi = min(t1, b)
            wlo = self.work_at(lo)
            whi = self.work_at(hi)
            out.append((f, wlo, np.maximum(whi, wlo)))
        return out

    def expected(self, a, b, t0, t1):
        """Expected (reads, writes) on page ranges [a, b) during [t0, t1] (vectorised)."""
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        reads = np.zeros(a.shape)
        writes = np.zeros(a.shape)
        for f, w0, w1 in self.epochs(t0, t1):
            r, w = f.range_sum(a, b)
            reads += r * (w1 - w0)
            writes += w * (w1 - w0)
        return reads, writes
