"""`telescope-bounded`, `telescope-flex`: Telescope (Nair et al., ATC'24, "Telescope:
Telemetry for Gargantuan Memory Footprint Applications"): DAMON regions whose samples
read upper-level page-table accessed bits.

The page walker sets the accessed bit of every level it walks, so the bit of a 2 MiB
(PMD), 1 GiB (PUD) or 512 GiB (P4D) entry says whether anything below it was touched
(`AccessedBits`, levels 1-3). Telescope keeps DAMON's regions, sampling, aggregation,
merge/split and age (everything of `Damon`) and changes one thing: where the sample of
a region is checked.

Level choice, per sample (each sampling interval every region draws a random page p
in [start, end), as ``damon_rand``):

- bounded: the highest level L whose entry holding p, [p // span_L x span_L, + span_L),
  lies inside the region (level 0, the PTE, always does). A region holding an aligned
  1 GiB is checked there; samples near its edges fall to 2 MiB or 4 KiB entries.
- flex: from the bounded level, go up one or two levels (never above 512 GiB) while the
  entry overshoots the region by at most ``error`` x the region's size (pages of the
  entry outside the region). Default ``error=25%`` (a choice: ATC'24 names an error
  allowance without a value we could use). The overshoot grows with the level, so
  flex picks the highest level within both limits. A larger entry finds a sparse hot
  set sooner; what lies outside the region can make it look hotter than it is.

ATC'24 setup (the defaults): 5 ms sampling, 200 ms aggregation, 10-1,000 regions.

Rate model (engine's `RateSource`): the sample of region i in interval j reads the bit
of its entry [a, b), cleared at the interval's start, Bernoulli(1 - exp(-Lambda)),
Lambda = the entry's summed rate x the work done in the interval, per field epoch
(`RateField.range_total`): the distribution `AccessedBits.test_since(L, ...)` draws,
with the same floor and horizon clamps, evaluated for all samples at once. Other
sources (`ExactSource`) go through `sim.bits.test_since` at the sample's level, one
call per sample time and level.

Cost: as DAMON, two accessed-bit operations per sample (the clear and the test, at any
level), counted on `sim.bits` and charged with `sim.charge_cpu` at `bits.check_cost`
(150 ns) each, with DAMON's miniature rule (`Damon.charge_checks`). `stats()["checks_by_level"]` counts the samples per level.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import TierlabError
from ..params import parse_number
from .base import MONITORS
from .damon import Damon
from .primitives import LEVEL_NAMES, LEVEL_SPAN

_SPAN = np.asarray(LEVEL_SPAN, dtype=np.int64)
TOP = len(LEVEL_SPAN) - 1
#: flex goes at most this many levels above the bounded level (ATC'24: one or two)
FLEX_UP = 2
#: the slides' per-level overshoot allowance: L2 (2 MiB entries) 25%, L3 (1 GiB) 15%,
#: higher levels as L3; one value ("25%") is the public code's rule at every level
DEFAULT_ERROR = "25%/15%"


def bounded_levels(start, end, pages) -> np.ndarray:
    """Per sample: the highest page-table level whose entry holding `pages` lies inside
    [start, end) (arrays broadcast together; pages inside their regions)."""
    start, end, pages = (np.asarray(x, dtype=np.int64) for x in (start, end, pages))
    lvl = np.zeros(np.broadcast(start, end, pages).shape, dtype=np.int64)
    for L in range(1, TOP + 1):
        span = LEVEL_SPAN[L]
        a = pages // span * span
        lvl[(a >= start) & (a + span <= end)] = L  # nested entries: inside at L => at L-1
    return lvl


def overshoot(start, end, pages, level) -> np.ndarray:
    """Pages of the level-`level` entry holding `pages` that lie outside [start, end)."""
    start, end, pages = (np.asarray(x, dtype=np.int64) for x in (start, end, pages))
    span = _SPAN[np.asarray(level, dtype=np.int64)]
    a = pages // span * span
    return span - (np.minimum(a + span, end) - np.maximum(a, start))


def flex_levels(start, end, pages, error, up: int = FLEX_UP) -> np.ndarray:
    """Per sample: the highest level at most `up` above the bounded one whose entry
    overshoots [start, end) by at most that level's allowance x (end - start) pages;
    `error` is one allowance or one per level from L2 up (the last for the rest)."""
    start, end, pages = (np.asarray(x, dtype=np.int64) for x in (start, end, pages))
    base = bounded_levels(start, end, pages)
    lvl = base.copy()
    per_level = np.atleast_1d(np.asarray(error, dtype=float))
    for L in range(1, TOP + 1):
        allow = per_level[min(L - 1, per_level.size - 1)] * (end - start)
        ok = (L > base) & (L <= base + up) & (overshoot(start, end, pages, L) <= allow)
        lvl[ok] = L  # the overshoot grows with the level: the ok levels are contiguous
    return lvl


def parse_error(value) -> list[float]:
    """The flex allowance per level from L2 (2 MiB entries) up: fractions (0.25) or
    percentages ('25%'), >= 0, '/'-separated ('25%/15%': L2 25%, L3 and above 15%)."""
    out = []
    for part in str(value).split("/"):
        s = part.strip()
        pct = s.endswith("%")
        out.append(parse_number(s[:-1] if pct else s, "telescope-flex error (a share of the "
                                "region's size per level, such as 25%/15% or 0.25)", lo=0.0,
                                hi=100.0) / (100 if pct else 1))
    return out


@MONITORS.register("telescope-bounded")
class TelescopeBounded(Damon):
    """Telescope (ATC'24), bounded: DAMON regions, each sample checked at the highest
    page-table level (4 KiB, 2 MiB, 1 GiB, 512 GiB) whose entry lies inside the region.

    Parameters as `damon` (ATC'24 setup by default: sample 5ms, aggr 200ms, 10-1,000
    regions).
    """

    def __init__(self, sample="5ms", aggr="200ms", update="1s", min_nr_regions=10,
                 max_nr_regions=1000, target=None, zero_age_reset=True,
                 name="telescope-bounded"):
        super().__init__(sample=sample, aggr=aggr, update=update,
                         min_nr_regions=min_nr_regions, max_nr_regions=max_nr_regions,
                         target=target, zero_age_reset=zero_age_reset, name=name)
        self.checks_by_level = np.zeros(TOP + 1, dtype=np.int64)

    def attach(self, sim) -> None:
        if getattr(sim, "real", False):  # Damon would hand itself to the kernel's DAMON
            raise TierlabError(f"{self.name} runs in the simulator only (mainline Linux "
                               "has no Telescope); use damon on a real process")
        super().attach(sim)

    def choose_levels(self, start, end, pages) -> np.ndarray:
        """The level at which each sample (page p of region [start, end)) is checked."""
        return bounded_levels(start, end, pages)

    # -- sampling ------------------------------------------------------------------
    def _sample(self, t0: float, t1: float) -> np.ndarray:
        """nr_accesses of every region over the sample intervals of (t0, t1], each
        sample read at its chosen page-table level."""
        sim = self.sim
        S, R = self.samples_per_aggr, self.nr_regions
        grid = t0 + self._unit_grid * (t1 - t0)
        grid[-1] = t1
        lo, hi = grid[None, :-1], grid[None, 1:]
        pages = self._draw_pages(np.arange(R))
        lvl = self.choose_levels(self._s[:, None], self._e[:, None], pages)
        span = _SPAN[lvl]
        first = pages // span * span  # the entry [first, first + span) of each sample
        bits = getattr(sim, "bits", None)
        source = getattr(sim, "source", None)
        timeline = getattr(source, "timeline", None)
        n = R * S
        if timeline is not None and hasattr(timeline, "fields"):
            lo = self._clamp(bits, lvl, lo, hi, t0)
            lam = self._entry_load(timeline, first, first + span, lo, hi)
            acc = self.rng.random(lam.shape) < -np.expm1(-lam)
            if bits is not None:
                bits.charge(2 * n)
        else:  # generic source: stateless prepare/check of each entry at its level
            acc = np.zeros((R, S), dtype=bool)
            for j in range(S):
                for L in np.unique(lvl[:, j]).tolist():
                    m = lvl[:, j] == L
                    acc[m, j] = bits.test_since(L, first[m, j] // LEVEL_SPAN[L],
                                                float(lo[0, j]), float(hi[0, j]))
        self.checks_by_level += np.bincount(lvl.ravel(), minlength=TOP + 1)
        self.charge_checks(2 * n)
        return acc.sum(axis=1).astype(np.int64)

    @staticmethod
    def _clamp(bits, lvl, lo, hi, t0):
        """Sample interval starts after the clamps `AccessedBits.test_since` applies:
        a level's floor (a clear_all within the interval) and the horizon."""
        levels = getattr(bits, "levels", None)
        if levels:
            floors = np.array([float(lv.floor) for lv in levels])
            if floors.max() > t0:
                f = floors[lvl]
                lo = np.where(f <= hi, np.maximum(lo, f), lo)
        horizon = getattr(bits, "horizon", math.inf)
        return np.maximum(lo, np.maximum(hi - horizon, 0.0))

    @staticmethod
    def _entry_load(tl, a, b, lo, hi) -> np.ndarray:
        """Expected accesses to entries [a, b) during their sample intervals (lo, hi],
        summed over the field epochs they overlap."""
        lam = np.zeros(a.shape)
        starts = list(tl.epoch_start) + [math.inf]
        t_lo, t_hi = float(np.min(lo)), float(np.max(hi))
        for k, f in enumerate(tl.fields):
            ea, eb = starts[k], starts[k + 1]
            if eb <= t_lo or ea >= t_hi or f.nsegments == 0:
                continue
            dw = np.maximum(tl.work_at(np.clip(hi, ea, eb)) - tl.work_at(np.clip(lo, ea, eb)),
                            0.0)
            if np.any(dw > 0):
                lam += f.range_total(a, b) * dw
        return lam

    def stats(self) -> dict:
        out = super().stats()
        out["checks_by_level"] = {name: int(c) for name, c in
                                  zip(LEVEL_NAMES, self.checks_by_level.tolist())}
        return out


@MONITORS.register("telescope-flex")
class TelescopeFlex(TelescopeBounded):
    """Telescope (ATC'24), flex: as bounded, but a sample may be checked one or two
    levels higher when that entry overshoots the region by at most the level's allowance
    of its size: the slides' L2 (2 MiB) 25%, L3 (1 GiB) 15% by default (`error=25%/15%`);
    `error=25%` is the public code's one allowance at every level.

    Parameters as `damon` plus error (per-level fractions or percentages, '/'-separated).
    """

    def __init__(self, sample="5ms", aggr="200ms", update="1s", min_nr_regions=10,
                 max_nr_regions=1000, target=None, zero_age_reset=True,
                 error=DEFAULT_ERROR, name="telescope-flex"):
        super().__init__(sample=sample, aggr=aggr, update=update,
                         min_nr_regions=min_nr_regions, max_nr_regions=max_nr_regions,
                         target=target, zero_age_reset=zero_age_reset, name=name)
        self.error = parse_error(error)
        self.params["error"] = error

    def choose_levels(self, start, end, pages) -> np.ndarray:
        return flex_levels(start, end, pages, self.error)
