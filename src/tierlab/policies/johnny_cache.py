"""Optane memory mode policies (Johnny Cache: Lepers and Zwaenepoel, "Johnny Cache: the
End of DRAM Cache Conflicts (in Tiered Main Memory Systems)", OSDI'23).

In memory mode the OS sees only the slow memory and the hardware caches it in DRAM,
direct-mapped by physical frame (engine/dram_cache.py), so what software can change is
which physical frame backs each page (engine/frames.py):

- `linux-mm`: memory mode as Linux runs it: effectively random frames, so by the
  birthday paradox many hot pages share a cache slot and evict each other;
- `jc-static`: Johnny Cache's static policy (its default, "near optimal"): each new
  page goes to the least contended slot (heat +50 per page, 20 contention levels);
- `jc-dynamic`: jc-static plus remapping: PEBS samples (period 5003; a store weighs 10,
  a load 1) over a moving window of the last 1,000,000 samples give each slot a heat on
  top of its 50 per page; every 1 s up to 100 hot pages that share a slot whose heat is
  >= 550 move to the least contended slots, lowest heat first, one page per slot (a
  copy of the page to a new frame, as a background migration). The hottest page of a
  slot stays. The window and the
  per-second budget scale with `--scale` (per-page sample rates do not change).

All three need a memory-mode machine (`optane-memory-mode`).
"""
from __future__ import annotations

from collections import deque

import numpy as np

from ..engine.frames import JC_PAGE_HEAT
from ..errors import TierlabError
from ..monitors.pebs import Pebs
from ..params import parse_int
from ..units import parse_duration
from .base import POLICIES
from .static import Static


class _MemoryMode(Static):
    """Static placement on a memory-mode machine with a chosen frame allocator."""

    needs_dram_cache = True
    frame_allocator = "random"


@POLICIES.register("linux-mm")
class LinuxMM(_MemoryMode):
    """Optane memory mode under Linux: random physical frames (Johnny Cache, OSDI'23)."""

    frame_allocator = "random"


@POLICIES.register("jc-static")
class JCStatic(_MemoryMode):
    """Johnny Cache static: each new page in the least contended DRAM-cache slot."""

    frame_allocator = "jc"


@POLICIES.register("jc-dynamic")
class JCDynamic(_MemoryMode):
    """Johnny Cache dynamic: jc-static plus PEBS-driven remapping of hot conflicting
    pages every second (OSDI'23).

    Parameters: period (5003), store_weight (10), window (1000000 samples), interval
    (1s), max_moves (100 per interval), hot_heat (550), frames (jc: on top of the
    static policy; random: remapping alone, on Linux's random frames).
    """

    frame_allocator = "jc"

    def __init__(self, period=5003, store_weight=10, window=1000000, interval="1s",
                 max_moves=100, hot_heat=550, frames="jc"):
        super().__init__(period=period, store_weight=store_weight, window=window,
                         interval=interval, max_moves=max_moves, hot_heat=hot_heat,
                         frames=frames)
        if frames not in ("jc", "random"):
            raise TierlabError(f"bad jc-dynamic frames {frames!r}; valid: jc, random")
        self.frame_allocator = frames
        self.period = parse_int(period, "jc-dynamic period", 1)
        self.store_weight = parse_int(store_weight, "jc-dynamic store_weight", 1)
        self.window = parse_int(window, "jc-dynamic window", 1)
        self.interval = parse_duration(interval, "jc-dynamic interval")
        if self.interval <= 0:
            raise TierlabError(f"bad jc-dynamic interval {interval!r}: must be > 0")
        self.max_moves = parse_int(max_moves, "jc-dynamic max_moves", 1)
        self.hot_heat = parse_int(hot_heat, "jc-dynamic hot_heat", 1)
        self._win: deque = deque()
        self._win_samples = 0
        self.remaps = 0
        self.rounds = 0

    def attach(self, sim) -> None:
        super().attach(sim)
        self.monitor = Pebs(events="fast_load+slow_load+store", period=self.period,
                            name="jc-pebs")
        self.monitor.attach(sim)
        self.monitor.subscribe(self._on_samples)
        scale = getattr(sim, "scale", 1.0)
        self._window = max(int(self.window * scale), 1)
        self._moves = max(int(round(self.max_moves * scale)), 1)
        sim.every(self.interval, self.tick)

    def _on_samples(self, batch, now: float) -> None:
        if len(batch.pages) == 0:
            return
        cache = self.sim.cache
        units = batch.pages // cache.fp
        weight = batch.reads + self.store_weight * batch.writes
        n = int(batch.reads.sum() + batch.writes.sum())
        self._win.append((units, weight.astype(float), n))
        self._win_samples += n
        while self._win and self._win_samples - self._win[0][2] >= self._window:
            self._win_samples -= self._win.popleft()[2]

    def heat(self):
        """(units, sampled heat per unit) over the window, and sampled heat per slot."""
        cache = self.sim.cache
        nslots = cache.spec.nslots
        if not self._win:
            return np.zeros(0, np.int64), np.zeros(0), np.zeros(nslots)
        u = np.concatenate([w[0] for w in self._win])
        h = np.concatenate([w[1] for w in self._win])
        units, inv = np.unique(u, return_inverse=True)
        uh = np.bincount(inv, h)
        live = cache.frame[units] >= 0
        units, uh = units[live], uh[live]
        return units, uh, np.bincount(cache.slot_of(units), uh, minlength=nslots)

    def tick(self, now: float) -> None:
        """Remap up to `max_moves` hot pages out of slots with heat >= hot_heat."""
        cache = self.sim.cache
        alloc = cache.allocator
        self.rounds += 1
        units, uh, slot_heat = self.heat()
        if hasattr(alloc, "extra_heat"):
            alloc.extra_heat = slot_heat  # later allocations avoid the sampled heat too
        if units.size == 0:
            return
        heat = JC_PAGE_HEAT * alloc.count + slot_heat
        slot = cache.slot_of(units)
        cand = (heat[slot] >= self.hot_heat) & (alloc.count[slot] > 1)
        if not cand.any():
            return
        units, uh, slot = units[cand], uh[cand], slot[cand]
        # keep the hottest sampled page of each slot where it is
        order = np.lexsort((-uh, slot))
        first = np.ones(order.size, dtype=bool)
        first[1:] = slot[order][1:] != slot[order][:-1]
        movable = order[~first]
        if movable.size == 0:
            return
        pick = movable[np.argsort(-uh[movable], kind="stable")[:self._moves]]
        # the least contended slots by heat (the capped levels would tie them), one
        # page each, never a slot a page leaves
        rank = heat.astype(float)
        rank[~alloc.open_slots()] = np.inf
        rank[slot[pick]] = np.inf
        dest = np.argsort(rank, kind="stable")[:pick.size]
        dest = dest[np.isfinite(rank[dest])]
        pick = pick[:dest.size]
        self.remaps += cache.remap(units[pick], dest)

    def stats(self) -> dict:
        return {"remaps": self.remaps, "rounds": self.rounds,
                "window_samples": self._win_samples}


