"""`pebs`: PEBS sampling of memory accesses, as HeMem's sampling thread sees it
(HeMem, SOSP'21, webglider/hemem src/pebs.c; Johnny Cache, OSDI'23).

Events (`events`, any of the three, joined by "+"): `fast_load` (loads served by a fast
node: the DRAM nodes unless `fast` names others), `slow_load` (loads served by any
other node) and `store` (all stores): HeMem's three. Each event has a sample period
(`period`: one value for all, or three joined by "+" in that order); HeMem's forks
use 5003, 10007 and 19997, the default here is 10007. Samples are drawn with the
`PebsSampler` primitive's model (`AccessSource.samples`: a Poisson thinning of each
event's access stream, pages in proportion to their rates, loads classified by the
page's node at poll time).

Every `poll` (10 ms) the sampling thread drains the buffer and hands subscribers one
`PebsBatch`: the sampled 4 KiB pages (sorted, unique) with their fast-load, slow-load
and store sample counts (`reads` = fast + slow, `writes` = store), plus the raw samples
in time order for consumers that care about order. All vectorised.

Cost: `sample_cost` CPU seconds per sample (300 ns, `PEBS_SAMPLE_SECONDS`: the PEBS
assist plus reading the record). `core=dedicated`: the sampling thread has its own
core (`sim.charge_cpu`, monitor CPU; it steals from the application only if no core is
spare). `core=shared`: it runs on the application's cores and its time is lost by the
application (`sim.stall`); Johnny Cache (OSDI'23) shows that this placement matters.
`busy=on`: the thread spins over the buffers instead of sleeping between polls (HeMem's
pebs_scan_thread is a `while (true)` loop pinned to a CPU), so it costs its whole core
for the run, not only the samples it reads (under `--scale F`, F of a core, as the
application's threads are F of theirs).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..errors import TierlabError
from ..params import parse_flag, parse_int, parse_nodes
from ..units import parse_duration
from .base import MONITORS, Monitor
from .primitives import PEBS_SAMPLE_SECONDS, PebsSampler
from ..structures import argsort_untied, merge_sorted, unique_event_counts

EVENTS = PebsSampler.EVENTS
CORES = ("dedicated", "shared")


class PebsBatch(NamedTuple):
    """One poll's samples over (t0, t1]: per-page counts and the raw samples."""

    t0: float
    t1: float
    pages: np.ndarray        #: sampled 4 KiB pages, sorted, unique (int64)
    fast: np.ndarray         #: fast-tier load samples per page
    slow: np.ndarray         #: slow-tier load samples per page
    store: np.ndarray        #: store samples per page
    sample_pages: np.ndarray  #: every sample's page, in time order
    sample_times: np.ndarray  #: every sample's time
    sample_events: np.ndarray  #: every sample's event (index into EVENTS)

    @property
    def reads(self) -> np.ndarray:
        return self.fast + self.slow

    @property
    def writes(self) -> np.ndarray:
        return self.store

    def __len__(self) -> int:
        return int(self.sample_pages.shape[0])


def _split(value) -> list[str]:
    if isinstance(value, (list, tuple)):
        return [str(v).strip() for v in value]
    return [v.strip() for v in str(value).replace(";", "+").split("+") if v.strip()]


def parse_events(value) -> tuple[str, ...]:
    evs = _split(value)
    bad = [e for e in evs if e not in EVENTS]
    if bad or not evs:
        raise TierlabError(f"bad pebs events {value!r}; valid: {', '.join(EVENTS)} "
                           "(joined by '+')")
    return tuple(e for e in EVENTS if e in evs)


def parse_period(value, what: str = "pebs period") -> dict:
    """One period for all events, or three joined by '+' (fast_load, slow_load, store)."""
    parts = _split(value) if not isinstance(value, (int, np.integer)) else [str(value)]
    try:
        vals = [parse_int(p, what, 1) for p in parts]
    except TierlabError:
        vals = []
    if len(vals) == 1:
        vals = vals * 3
    if len(vals) != 3:
        raise TierlabError(f"bad {what} {value!r}: a positive integer such as 10007, "
                           "or three joined by '+' (fast_load+slow_load+store)")
    return dict(zip(EVENTS, vals))


def parse_core(value) -> str:
    s = str(value).strip().lower()
    if s not in CORES:
        raise TierlabError(f"bad pebs core {value!r}; valid: {', '.join(CORES)}")
    return s


@MONITORS.register("pebs")
class Pebs(Monitor):
    """PEBS samples (HeMem's three events) per page every poll; the sampling thread on a
    dedicated core or on the application's."""

    def __init__(self, events="fast_load+slow_load+store", period=10007, poll="10ms",
                 core="dedicated", sample_cost="300ns", fast="", busy="off", name="pebs"):
        super().__init__(events=events, period=period, poll=poll, core=core,
                         sample_cost=sample_cost, fast=fast, busy=busy)
        self.busy = parse_flag(busy, "pebs busy")
        self.events = parse_events(events)
        self.period = parse_period(period)
        self.poll_s = parse_duration(poll, "pebs poll")
        if self.poll_s <= 0:
            raise TierlabError(f"bad pebs poll {poll!r}: must be > 0")
        self.core = parse_core(core)
        self.sample_cost = parse_duration(sample_cost, "pebs sample_cost") \
            if sample_cost is not None else PEBS_SAMPLE_SECONDS
        self.fast = parse_nodes(fast, "pebs fast")
        self.name = name
        self._subs = []
        self.samples = {e: 0 for e in EVENTS}
        self.polls = 0
        self.cpu_seconds = 0.0

    def attach(self, sim) -> None:
        super().attach(sim)
        if getattr(sim, "real", False):
            raise TierlabError("pebs: PEBS sampling is simulated only (user space cannot "
                               "read the samples here); monitors that run for real: "
                               "damon, idt-regions")
        fast = self.fast or sim.machine.fast_nodes()
        bad = [n for n in fast if not 0 <= n < sim.machine.nnodes]
        if bad:
            raise TierlabError(f"bad pebs fast node {bad[0]}; valid: 0..{sim.machine.nnodes - 1}")
        self.sampler = PebsSampler(sim.source, period=self.period, node_of=sim.node_of,
                                   fast_nodes=fast, rng=sim.rng_for(self.name),
                                   sample_cost=self.sample_cost)
        self._fast_lut = np.zeros(256, dtype=bool)
        self._fast_lut[list(fast)] = True
        self._last = float(sim.now)
        monitors = getattr(sim, "monitors", None)
        if isinstance(monitors, dict):
            monitors.setdefault(self.name, self)
        sim.every(self.poll_s, self.tick)

    def subscribe(self, fn) -> None:
        """fn(batch: PebsBatch, now) after every poll (also when it found no sample)."""
        self._subs.append(fn)

    # -- sampling ---------------------------------------------------------------------
    def draw(self, t0: float, t1: float) -> PebsBatch:
        """The samples of the enabled events over (t0, t1], counted per page.

        When both load events are on with one period, the loads are drawn once and
        split by the page's node (splitting a Poisson stream by a page property gives
        the same independent streams as two thinned draws)."""
        sp = self.sampler
        src, rng = sp.source, sp.rng
        node_of = sp.node_of
        fast = self._fast_lut
        draws = []  # (event index or None for split loads, period, kind, select)
        loads = [e for e in ("fast_load", "slow_load") if e in self.events]
        if len(loads) == 2 and sp.period["fast_load"] == sp.period["slow_load"]:
            draws.append((None, sp.period["fast_load"], "read", None))
        else:
            for e in loads:
                want = e == "fast_load"
                draws.append((EVENTS.index(e), sp.period[e], "read",
                              lambda p, want=want: fast[node_of(p)] == want))
        if "store" in self.events:
            draws.append((EVENTS.index("store"), sp.period["store"], "write", None))
        pages, times, evs = [], [], []
        for ev, period, kind, select in draws:
            p, t = src.samples(t0, t1, period, kind, rng, select=select)
            p = np.asarray(p, dtype=np.int64)
            if ev is None:
                e = np.where(fast[node_of(p)], 0, 1).astype(np.int8)
            else:
                e = np.full(len(p), ev, dtype=np.int8)
            pages.append(p)
            times.append(np.asarray(t, dtype=float))
            evs.append(e)
        if any(np.isnan(x).any() for x in times):  # numpy's sort puts NaN last
            p, t, ev = (np.concatenate(x) for x in (pages, times, evs))
            if len(draws) > 1:
                order, t = argsort_untied(t)
                p, ev = p[order], ev[order]
        else:  # each draw is in time order: stable merges are the stable sort
            t, p, ev = times[0], pages[0], evs[0]
            for t2, p2, e2 in zip(times[1:], pages[1:], evs[1:]):
                t, p, ev = merge_sorted(t, p, ev, t2, p2, e2)
        u, counts = unique_event_counts(p, ev, 3)
        for i, e in enumerate(EVENTS):
            n = int(counts[:, i].sum())
            sp.samples[e] += n
            self.samples[e] += n
        sp.last = max(sp.last, float(t1))
        return PebsBatch(float(t0), float(t1), u, counts[:, 0], counts[:, 1], counts[:, 2],
                         p, t, ev)

    def tick(self, now: float) -> None:
        """One drain of the sample buffer: draw, charge the thread's CPU, deliver."""
        batch = self.draw(self._last, now)
        self._last = float(now)
        self.polls += 1
        cost = len(batch) * self.sample_cost
        if self.busy:  # a spinning thread holds its core whatever the sample count
            # (one core at full scale: `--scale F` runs F of the threads, F of the core)
            cost = max(cost, float(now - batch.t0) * getattr(self.sim, "scale", 1.0))
        if cost > 0:
            self.cpu_seconds += cost
            self.sampler.cpu_seconds += cost
            if self.core == "dedicated":
                self.sim.charge_cpu(cost, "monitor")
            else:
                self.sim.stall(cost)
        for fn in self._subs:
            fn(batch, now)

    def stats(self) -> dict:
        return {"samples": {e: int(n) for e, n in self.samples.items()},
                "polls": self.polls, "core": self.core, "busy": self.busy,
                "cpu_seconds": float(self.cpu_seconds),
                "period": {e: int(v) for e, v in self.period.items()}}
