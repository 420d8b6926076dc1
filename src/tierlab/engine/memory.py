"""Page placement, watermarks and the mechanics of allocation and migration.

Placement is one uint8 per 4 KiB page (the node id; 255 = not allocated), the one
per-page array DESIGN.md allows. Watermarks follow Linux's min/low/high per node: an
allocation takes a node while its free pages stay above `low` (the allocator's fast
path), kswapd wakes below `low` and reclaims (here: demotes down the path) until `high`.
"""
from __future__ import annotations

import numpy as np

from ..machines import Machine

UNALLOC = 255


def watermark_pages(capacity: np.ndarray, fractions) -> tuple:
    """(min, low, high) watermarks in pages per node, from fractions of each node."""
    return tuple((capacity * f).astype(np.int64) for f in fractions)


class Memory:
    """Where every page is, and how full every node is."""

    def __init__(self, machine: Machine, npages: int, wmark_min: float = 0.005,
                 wmark_low: float = 0.01, wmark_high: float = 0.015):
        """Watermarks as fractions of each node. Linux derives min from min_free_kbytes
        and spaces low/high by watermark_scale_factor (default 0.1% of the node); we use
        0.5/1/1.5% so the gaps stay visible on scaled-down machines (a choice)."""
        if not 0 <= wmark_min <= wmark_low <= wmark_high < 0.5:
            raise ValueError("watermarks must satisfy 0 <= min <= low <= high < 0.5")
        self.machine = machine
        self.npages = int(npages)
        self.node = np.full(self.npages, UNALLOC, dtype=np.uint8)
        self.capacity = np.array([t.capacity_pages for t in machine.tiers], dtype=np.int64)
        self.used = np.zeros(machine.nnodes, dtype=np.int64)
        #: frames held per node beyond the page map: NOMAD's shadow copies
        #: (engine/shadow.py); they take capacity but are not the process's pages
        self.held = np.zeros(machine.nnodes, dtype=np.int64)
        self.wmark_min, self.wmark_low, self.wmark_high = watermark_pages(
            self.capacity, (wmark_min, wmark_low, wmark_high))

    @property
    def free(self) -> np.ndarray:
        return self.capacity - self.used - self.held

    @property
    def allocated(self) -> int:
        return int(self.used.sum())

    def place_range(self, start: int, end: int, node: int) -> None:
        """First touch of pages [start, end) on `node` (they must be unallocated)."""
        n = end - start
        if n <= 0:
            return
        if self.used[node] + self.held[node] + n > self.capacity[node]:
            raise RuntimeError(f"node {node} over capacity")
        self.node[start:end] = node
        self.used[node] += n

    def release_range(self, start: int, end: int) -> np.ndarray:
        """Free pages [start, end); returns the count freed per node."""
        seg = self.node[start:end]
        freed = np.bincount(seg, minlength=256)[: self.machine.nnodes]
        seg[:] = UNALLOC
        self.used -= freed
        return freed

    def pages_on(self, node: int, start: int, limit: int, flags=None, mask: int = 0,
                 value: int = 0):
        """Up to `limit` pages on `node` (and, given `flags`, with flags & mask ==
        value), scanning addresses from `start` and wrapping (a CLOCK hand over the
        node's pages). Returns (pages, next hand position, addresses scanned). The scan
        window starts near the need and doubles."""
        chunk = max(4 * limit, 4096)
        found = []
        n = 0
        pos = start % max(self.npages, 1)
        scanned = 0
        while n < limit and scanned < self.npages:
            end = min(pos + chunk, self.npages, pos + self.npages - scanned)
            sel = self.node[pos:end] == node
            if flags is not None:
                sel &= (flags[pos:end] & mask) == value
            hits = np.flatnonzero(sel) + pos
            if n + len(hits) > limit:
                hits = hits[: limit - n]
                end = int(hits[-1]) + 1
            found.append(hits)
            n += len(hits)
            scanned += end - pos
            pos = end % self.npages
            chunk = min(2 * chunk, 1 << 22)
        pages = np.concatenate(found) if found else np.zeros(0, dtype=np.int64)
        return pages.astype(np.int64), pos, scanned


class PassTimes:
    """When a CLOCK hand last passed each address: a compact interval map (sorted
    boundaries, one time per interval), so per-page state is never stored."""

    def __init__(self, npages: int, t0: float = 0.0):
        self.npages = int(npages)
        self.bounds = np.array([0, self.npages], dtype=np.int64)
        self.times = np.array([t0])

    def get(self, pages) -> np.ndarray:
        i = np.searchsorted(self.bounds, np.asarray(pages, dtype=np.int64), side="right") - 1
        return self.times[np.clip(i, 0, len(self.times) - 1)]

    def set(self, a: int, c: int, t: float) -> None:
        """Pages [a, c) were passed at time t."""
        a, c = max(int(a), 0), min(int(c), self.npages)
        if c <= a:
            return
        b, ts = self.bounds, self.times
        i = int(np.searchsorted(b, a, side="right")) - 1  # interval holding a
        j = int(np.searchsorted(b, c - 1, side="right")) - 1  # interval holding c - 1
        left_b, left_t = b[:i], ts[:i]
        if b[i] < a:  # interval i keeps its part before a
            left_b, left_t = b[: i + 1], ts[: i + 1]
        mid_b, mid_t = [a], [t]
        if c < b[j + 1]:  # interval j keeps its part from c on
            mid_b, mid_t = [a, c], [t, ts[j]]
        bounds = np.concatenate((left_b, mid_b, b[j + 1:]))
        times = np.concatenate((left_t, mid_t, ts[j + 1:]))
        keep = np.concatenate(([True], times[1:] != times[:-1]))
        self.times = times[keep]
        self.bounds = np.concatenate((bounds[:-1][keep], [self.npages])).astype(np.int64)

    def set_swept(self, start: int, scanned: int, t: float) -> None:
        """A sweep of `scanned` addresses from `start`, wrapping at the end."""
        if scanned <= 0:
            return
        end = start + min(scanned, self.npages)
        self.set(start, min(end, self.npages), t)
        if end > self.npages:
            self.set(0, end - self.npages, t)
