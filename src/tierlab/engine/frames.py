"""Physical frame allocators under the placement: which physical frame backs each
frame-sized unit of a workload's address space. They matter only where physical
addresses do: a memory-mode DRAM cache indexed by frame (engine/dram_cache.py), and a
physical-address DAMON (`NodeFrames`, monitors/damon_paddr.py).

Frames are numbered 0..nframes-1 within the memory the OS sees; frame f maps to cache
slot f mod nslots, and slot s holds the frames s, s + nslots, s + 2 nslots, ... (its
*ways*). Registered by name (a policy names the one it wants in `frame_allocator`):

- `random`: Linux. The buddy allocator's free lists are effectively a random order of
  frames after a while of uptime (Johnny Cache, OSDI'23, section 2), so a new unit gets
  a uniformly random free frame; freed frames are reused first (LIFO, as the per-CPU
  free lists). Hot pages then share slots as the birthday paradox says.
- `boot`: Linux right after boot: the buddy allocator hands out a node's frames in
  address order (the boot-time free lists are filled at their tails,
  mm/page_alloc.c, __free_pages_core with FPI_TO_TAIL); freed frames are reused first.
- `jc`: Johnny Cache's static policy: each new unit goes to a slot of the lowest
  contention level, level = min(heat / 50, 19) with heat = 50 per allocated unit plus
  any sampled heat a dynamic policy adds (`extra_heat`); ties broken at random.
"""
from __future__ import annotations

import numpy as np

from ..errors import TierlabError
from ..interface import UNALLOC
from ..registry import Registry

FRAME_ALLOCATORS: Registry = Registry("frame allocator")

#: Johnny Cache: heat per allocated page, and the number of contention levels
JC_PAGE_HEAT = 50
JC_LEVELS = 20


class FrameAllocator:
    """Hands out and takes back physical frames (int64 arrays)."""

    def __init__(self, nframes: int, nslots: int, rng: np.random.Generator):
        if nframes < 1 or nslots < 1:
            raise TierlabError(f"bad frame allocator size: {nframes} frames, {nslots} slots")
        self.nframes, self.nslots, self.rng = int(nframes), int(nslots), rng
        self.count = np.zeros(self.nslots, dtype=np.int64)  # allocated frames per slot

    def alloc(self, n: int) -> np.ndarray:
        raise NotImplementedError

    def free(self, frames) -> None:
        raise NotImplementedError

    def open_slots(self) -> np.ndarray:
        """Slots with a free frame."""
        raise NotImplementedError

    def alloc_in(self, slots) -> np.ndarray:
        """One frame in each of `slots` (distinct, each with a free way)."""
        raise NotImplementedError

    def _no_room(self, n: int):
        return TierlabError(f"out of physical frames: {n} more wanted, "
                            f"{self.nframes - int(self.count.sum())} free")


@FRAME_ALLOCATORS.register("random")
class RandomFrames(FrameAllocator):
    """Linux: a uniformly random free frame per unit; freed frames are reused first."""

    def __init__(self, nframes: int, nslots: int, rng: np.random.Generator):
        super().__init__(nframes, nslots, rng)
        self._stack = self._free_order()
        self._top = self.nframes

    def _free_order(self) -> np.ndarray:
        """The free frames at the start, the last handed out first."""
        return self.rng.permutation(self.nframes).astype(np.int64)

    def alloc(self, n: int) -> np.ndarray:
        n = int(n)
        if n > self._top:
            raise self._no_room(n)
        out = self._stack[self._top - n:self._top][::-1].copy()
        self._top -= n
        self.count += np.bincount(out % self.nslots, minlength=self.nslots)
        return out

    def free(self, frames) -> None:
        f = np.asarray(frames, dtype=np.int64)
        self._stack[self._top:self._top + f.size] = f
        self._top += f.size
        self.count -= np.bincount(f % self.nslots, minlength=self.nslots)

    def open_slots(self) -> np.ndarray:
        return np.bincount(self._stack[:self._top] % self.nslots,
                           minlength=self.nslots) > 0

    def alloc_in(self, slots) -> np.ndarray:
        """The most recently freed frame of each of `slots` (distinct, each open)."""
        slots = np.asarray(slots, dtype=np.int64)
        free = self._stack[:self._top]
        rev = (free % self.nslots)[::-1]
        u, first = np.unique(rev, return_index=True)
        idx = self._top - 1 - first[np.searchsorted(u, slots)]
        out = free[idx].copy()
        keep = np.ones(self._top, dtype=bool)
        keep[idx] = False
        rest = free[keep]
        self._stack[:rest.size] = rest
        self._top = rest.size
        self.count[slots] += 1
        return out


@FRAME_ALLOCATORS.register("boot")
class BootFrames(RandomFrames):
    """Linux after boot: free frames in address order; freed frames are reused first."""

    def _free_order(self) -> np.ndarray:
        return np.arange(self.nframes - 1, -1, -1, dtype=np.int64)


@FRAME_ALLOCATORS.register("jc")
class JohnnyCacheFrames(FrameAllocator):
    """Johnny Cache's static allocation: the least contended slot first (OSDI'23)."""

    def __init__(self, nframes: int, nslots: int, rng: np.random.Generator):
        super().__init__(nframes, nslots, rng)
        ways = -(-self.nframes // self.nslots)
        self._used = np.zeros((ways, self.nslots), dtype=bool)
        self._used.reshape(-1)[self.nframes:] = True  # frames past the end do not exist
        self._free_ways = (~self._used).sum(axis=0)
        self.extra_heat = np.zeros(self.nslots)

    def levels(self) -> np.ndarray:
        """Contention level of every slot: min(heat / 50, 19)."""
        heat = JC_PAGE_HEAT * self.count + self.extra_heat
        return np.minimum(heat // JC_PAGE_HEAT, JC_LEVELS - 1).astype(np.int64)

    def open_slots(self) -> np.ndarray:
        """Slots with a free frame."""
        return self._free_ways > 0

    def alloc(self, n: int) -> np.ndarray:
        n = int(n)
        if n > int(self._free_ways.sum()):
            raise self._no_room(n)
        out = []
        while n > 0:
            lvl = self.levels()
            lvl[~self.open_slots()] = JC_LEVELS
            cand = np.flatnonzero(lvl == lvl.min())
            if cand.size > n:
                cand = np.sort(self.rng.choice(cand, n, replace=False))
            out.append(self.alloc_in(cand))
            n -= cand.size
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    def alloc_in(self, slots) -> np.ndarray:
        """One frame in each of `slots` (distinct, each with a free way)."""
        slots = np.asarray(slots, dtype=np.int64)
        way = np.argmin(self._used[:, slots], axis=0)
        self._used[way, slots] = True
        self._free_ways[slots] -= 1
        self.count[slots] += 1
        return way * self.nslots + slots

    def free(self, frames) -> None:
        f = np.asarray(frames, dtype=np.int64)
        way, slot = np.divmod(f, self.nslots)
        self._used[way, slot] = False
        np.add.at(self._free_ways, slot, 1)
        np.subtract.at(self.count, slot, 1)


def make_allocator(name: str, nframes: int, nslots: int, rng) -> FrameAllocator:
    """The named allocator; unknown names fail listing the valid ones."""
    cls = FRAME_ALLOCATORS.get(name)
    return cls(nframes, nslots, rng)


class NodeFrames:
    """Which frame of its node backs each page: the physical layout a physical-address
    DAMON (paddr ops) sees. Node n's frames 0..capacity-1 each hold a workload page
    (its number), another process's idle page (IDLE: `Memory.idle`), memory held by
    others (OTHER: the rest of `Memory.held`) or nothing (FREE). Frames come from one
    allocator per node (`boot` or `random`); at the start others' frames are taken
    first, then the idle ones, then the pages in address order. `sync` follows the page
    map: the frames of the pages that left a node are freed first, then the pages that
    arrived get frames, so a demotion reuses the frames a promotion just left, as the
    per-CPU free lists hand back the most recently freed frames first."""

    FREE, IDLE, OTHER = -1, -2, -3

    def __init__(self, mem, order: str = "boot", rng: np.random.Generator | None = None):
        rng = rng if rng is not None else np.random.default_rng(0)
        self.mem = mem
        self.order = order
        self.owner = [np.full(int(c), self.FREE, dtype=np.int64) for c in mem.capacity]
        self._alloc = [make_allocator(order, max(int(c), 1), 1, rng) for c in mem.capacity]
        self.frame = np.full(mem.npages, -1, dtype=np.int64)
        self._seen = np.full(mem.npages, UNALLOC, dtype=np.uint8)
        self._idle = np.zeros(len(self.owner), dtype=np.int64)
        self._other = np.zeros(len(self.owner), dtype=np.int64)
        #: per node, bumped whenever what its frames hold changes
        self.version = [0] * len(self.owner)
        self.sync()

    def _take(self, node: int, n: int, mark) -> np.ndarray:
        f = self._alloc[node].alloc(n)
        self.owner[node][f] = mark
        self.version[node] += 1
        return f

    def _release(self, node: int, frames) -> None:
        self.owner[node][frames] = self.FREE
        self._alloc[node].free(frames)
        self.version[node] += 1

    def _follow_held(self, node: int, tracked: np.ndarray, want: int, mark: int) -> None:
        """Others' (or idle) frames of `node` to `want`: the last taken go first."""
        d = int(want - tracked[node])
        if d > 0:
            self._take(node, d, mark)
        elif d < 0:
            self._release(node, np.flatnonzero(self.owner[node] == mark)[d:])
        tracked[node] = want

    def sync(self) -> None:
        """Follow the page map (and `Memory.held` / `Memory.idle`) since the last call."""
        mem = self.mem
        node = mem.node
        other = mem.held - mem.idle
        for v in range(len(self.owner)):  # what the others hold shrinks first
            if other[v] < self._other[v]:
                self._follow_held(v, self._other, int(other[v]), self.OTHER)
            if mem.idle[v] < self._idle[v]:
                self._follow_held(v, self._idle, int(mem.idle[v]), self.IDLE)
        ch = np.flatnonzero(node != self._seen)
        if ch.size:
            was, now = self._seen[ch], node[ch]
            for v in range(len(self.owner)):
                gone = ch[was == v]
                if gone.size:
                    self._release(v, self.frame[gone])
                    self.frame[gone] = -1
        for v in range(len(self.owner)):
            if other[v] > self._other[v]:
                self._follow_held(v, self._other, int(other[v]), self.OTHER)
            if mem.idle[v] > self._idle[v]:
                self._follow_held(v, self._idle, int(mem.idle[v]), self.IDLE)
        if ch.size:
            for v in range(len(self.owner)):
                came = ch[now == v]
                if came.size:
                    self.frame[came] = self._take(v, came.size, came)
            self._seen[ch] = now

    def move_idle(self, src: int, frames, dst: int) -> None:
        """`frames` of src's idle pages were demoted to dst (`Simulation.demote_idle`)."""
        frames = np.asarray(frames, dtype=np.int64)
        if frames.size:
            self._release(src, frames)
            self._take(dst, frames.size, self.IDLE)
            self._idle[src] -= frames.size
            self._idle[dst] += frames.size
