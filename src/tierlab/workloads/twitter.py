"""twitter: a cache/KV request stream shaped after Twitter's production cache traces,
where most pages are touched fewer than twice, so first-touch placement decides where
their accesses land (the HPDC'23 allocation-policy poster: 38-67% of the pages of the
Twitter traces are touched fewer than twice).

Sources: Yang, Yue, Rashmi, "A large scale analysis of hundreds of in-memory cache
clusters at Twitter" (OSDI'20) and the statistics of its traces
(github.com/twitter/cache-trace, stat/2020Mar.md). Write-heavy clusters are common
(35% of clusters have more than 30% writes; e.g. cluster8 set 0.50, cluster13 set
0.62); objects are short-lived under one TTL per cluster (cluster12/13: 300 s); many
objects are one-hit wonders, set and never read (cluster13 64%, cluster12 81%, cluster4
29%) and the mean request count per object can be as low as 1.3-1.6 (cluster12/13);
cluster13's mean value is 4,266 B.

Model (work unit: one *request*; every request moves one object, 64 cache lines):

- Objects are page sized (4 KiB, cluster13's value size) and live in a cache of
  ``size`` bytes stored log-structured in creation order, as Pelikan's Segcache
  (Yang et al., NSDI'21) does: a ring of size/4 KiB pages. An object expires one TTL
  after its set, when the ring comes back to its slot; the expired object's page is
  freed (the allocator purges it, e.g. jemalloc's MADV_DONTNEED decay) and the new
  object's set first-touches it again, so the allocation policy places every new
  object. The cache starts empty and fills during the first turnover; ``turnover`` is
  how many times the ring is written in the run.
- A fraction ``sets`` of the requests set a new object (one full write of its page).
  Each new object is then read 0, 1 or 2 times, "soon" after its set: within the first
  ``soon`` of its TTL (a fraction; the reads are spread evenly over that window). The
  number of reads is drawn per object (fixed by ``seed``): 0 with probability
  ``one_hit`` (one-hit wonders), 2 with ``two_reads``, else 1. With the defaults 55% of
  the objects are touched once, inside the poster's 38-67%, and an object gets 1.65
  requests on average (cluster13: 1.6).
- The remaining requests, 1 - sets x (1 + mean reads), read a small hot set of popular
  objects (``hot`` bytes, allocated first, uniformly popular): the Zipf head of a
  cluster's keys.
- The field changes ``steps`` times (each step sets 1/steps of the objects); a step's
  Change frees the expired slots it reuses, allocates them in ring order and carries the
  rates of the step: writes on the new objects, reads on the objects of the last
  ``soon`` window, reads on the hot set; older objects wait, unread, for their expiry.

Defaults: a 64 GiB cache (twice the 32 GiB DRAM of the built-in machines, as ycsb's
heap), 1 GiB hot, 8 client threads, memory-level parallelism 4 and 200 ns of CPU per
request (an in-process store, as ycsb); turnover 4 (the first fills the cache), 128
steps, reads within the first 1/16 of the TTL. `touches(step)` integrates the fields
over a step's objects (expected requests per page), the property the poster measured.
"""
from __future__ import annotations

import numpy as np

from ..errors import TierlabError
from ..field import RateField
from ..params import parse_bytes, parse_number
from ..units import PAGE, fmt_size
from .base import WORKLOADS, Change, Workload
from ._common import common_params, parse_scale

LINES = PAGE // 64  #: cache lines per (page-sized) object


@WORKLOADS.register("twitter")
class Twitter(Workload):
    """Twitter-like cache stream: short-lived objects set once, read at most twice."""

    def __init__(self, size="64GiB", hot="1GiB", sets=0.5, one_hit=0.55, two_reads=0.2,
                 soon=0.0625, turnover=4, steps=128, threads=8, compute_ns=200.0, mlp=4.0,
                 scale=1.0, seed=0):
        super().__init__()
        scale = parse_scale(scale)
        self.name = "twitter"
        self.work_unit = "requests"
        self.seed = int(seed)
        self.threads, self.compute_ns, self.mlp = common_params(threads, compute_ns, mlp,
                                                                what="twitter")
        self.ring = max(1, -(-int(round(parse_bytes(size, "twitter size", minimum=PAGE)
                                          * scale)) // PAGE))
        hb = parse_bytes(hot, "twitter hot", minimum=0)
        self.hot = 0 if hb == 0 else max(1, -(-int(round(hb * scale)) // PAGE))
        self.sets = parse_number(sets, "twitter sets", lo=0.0, hi=1.0, lo_open=True)
        self.one_hit = parse_number(one_hit, "twitter one_hit", lo=0.0, hi=1.0)
        self.two_reads = parse_number(two_reads, "twitter two_reads", lo=0.0, hi=1.0)
        if self.one_hit + self.two_reads > 1 + 1e-12:
            raise TierlabError(f"bad twitter one_hit {one_hit!r} and two_reads "
                               f"{two_reads!r}: their sum must be <= 1")
        self.mean_reads = (1.0 - self.one_hit - self.two_reads) + 2.0 * self.two_reads
        self.hot_share = 1.0 - self.sets * (1.0 + self.mean_reads)
        if self.hot_share < -1e-12:
            raise TierlabError(
                f"bad twitter sets {sets!r}: sets x (1 + mean reads {self.mean_reads:.3g})"
                f" = {self.sets * (1 + self.mean_reads):.3g} exceeds all requests; must "
                f"be <= {1 / (1 + self.mean_reads):.3g}")
        self.hot_share = max(self.hot_share, 0.0)
        if self.hot_share > 0 and self.hot == 0:
            raise TierlabError(f"bad twitter hot {hot!r}: {self.hot_share:.3g} of the "
                               f"requests read the hot set, which must not be empty")
        self.turnover = parse_number(turnover, "twitter turnover", lo=0.0, lo_open=True)
        self.steps = parse_number(steps, "twitter steps", lo=1, hi=100000, integer=True)
        if self.steps < self.turnover:
            raise TierlabError(f"bad twitter steps {steps!r}: at least one step per "
                               f"turnover (turnover {turnover!r})")
        self.soon = parse_number(soon, "twitter soon", lo=0.0, hi=1.0, lo_open=True)
        self.window = max(1, int(round(self.soon * self.steps / self.turnover)))
        total = int(round(self.turnover * self.ring))
        #: global object index where each step's objects start (objects are numbered in
        #: creation order; object g lives in ring slot g mod ring)
        self.bounds = np.round(np.linspace(0, total, self.steps + 1)).astype(np.int64)
        self.objects = total
        self.step_work = total / self.sets / self.steps  # requests per step
        self.total_work = float(self.step_work * self.steps)
        self.npages = self.footprint_pages = self.hot + self.ring
        self.params = {"size": fmt_size(self.ring * PAGE), "hot": fmt_size(self.hot * PAGE),
                       "sets": self.sets, "one_hit": self.one_hit,
                       "two_reads": self.two_reads, "soon": self.soon,
                       "turnover": self.turnover, "steps": self.steps,
                       "threads": self.threads, "requests": self.total_work}

    # -- layout ---------------------------------------------------------------------
    def slots(self, g0: int, g1: int) -> np.ndarray:
        """Pages of objects [g0, g1) (ring slots after the hot set)."""
        return self.hot + np.arange(g0, g1, dtype=np.int64) % self.ring

    def _ranges(self, g0: int, g1: int) -> np.ndarray | None:
        """(n, 2) page ranges of objects [g0, g1), in creation order (split at the
        ring's wrap)."""
        if g1 <= g0:
            return None
        out = []
        g = g0
        while g < g1:
            s = g % self.ring
            take = min(g1 - g, self.ring - s)
            out.append((self.hot + s, self.hot + s + take))
            g += take
        return np.asarray(out, dtype=np.int64).reshape(-1, 2)

    def reads_of(self, step: int) -> np.ndarray:
        """Reads (0, 1 or 2) of each object set in `step`, fixed by the seed."""
        n = int(self.bounds[step + 1] - self.bounds[step])
        u = np.random.default_rng([self.seed, 0x7717, step]).random(n)
        return np.where(u < self.one_hit, 0, np.where(u >= 1.0 - self.two_reads, 2, 1))

    # -- fields -----------------------------------------------------------------------
    def field_at(self, step: int) -> RateField:
        """Rates during `step`: writes on its new objects, reads on the objects of the
        last `window` steps, reads on the hot set."""
        dw = self.step_work
        pages, rr, ww = [], [], []
        # objects whose slot a later set has not reused yet
        live = int(self.bounds[step + 1]) - self.ring
        for j in range(max(0, step - self.window + 1), step + 1):
            g0, g1 = int(self.bounds[j]), int(self.bounds[j + 1])
            cut = max(live - g0, 0)
            p = self.slots(g0 + cut, g1)
            pages.append(p)
            rr.append(self.reads_of(j)[cut:] * (LINES / (self.window * dw)))
            ww.append(np.full(len(p), LINES / dw if j == step else 0.0))
        p = np.concatenate(pages)
        r = np.concatenate(rr)
        w = np.concatenate(ww)
        order = np.argsort(p, kind="stable")
        p, r, w = p[order], r[order], w[order]
        keep = (r > 0) | (w > 0)
        p, r, w = p[keep], r[keep], w[keep]
        starts, ends = p, p + 1
        if self.hot_share > 0:
            starts = np.concatenate(([0], starts))
            ends = np.concatenate(([self.hot], ends))
            r = np.concatenate(([self.hot_share * LINES / self.hot], r))
            w = np.concatenate(([0.0], w))
        return RateField(starts, ends, r, w, self.npages)

    def changes(self):
        for k in range(self.steps):
            g0, g1 = int(self.bounds[k]), int(self.bounds[k + 1])
            alloc = self._ranges(g0, g1)
            free = self._ranges(max(g0, self.ring), g1)
            if k == 0 and self.hot:
                hot = np.array([[0, self.hot]], dtype=np.int64)
                alloc = hot if alloc is None else np.concatenate((hot, alloc))
            yield Change(float(k * self.step_work), field=self.field_at(k), alloc=alloc,
                         free=free, label=f"step {k}")

    def touches(self, step: int) -> np.ndarray:
        """Expected requests touching each page set in `step` over its life: the
        workload's fields integrated over the steps its object is live (a request moves
        the whole page-sized object: 64 line accesses)."""
        g0, g1 = int(self.bounds[step]), int(self.bounds[step + 1])
        p = self.slots(g0, g1)
        out = np.zeros(len(p))
        # an object's slot is reused `ring` objects later: stop before that step
        last = int(np.searchsorted(self.bounds, g0 + self.ring, side="right")) - 1
        for j in range(step, min(self.steps, step + self.window, max(last, step + 1))):
            r, w = self.field_at(j).rate_of(p)
            out += (r + w) * self.step_work / LINES
        return out
