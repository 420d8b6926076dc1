"""Page placement, watermarks and the mechanics of allocation and migration.

Placement is one uint8 per 4 KiB page (the node id; 255 = not allocated): state that
grows with the address space stays compact, at most a uint8 per page where it cannot be
avoided. Watermarks follow Linux's min/low/high per node: an allocation takes a node
while its free pages stay above `low` (the allocator's fast path), kswapd wakes below
`low` and reclaims (here: demotes down the path) until `high`.
"""
from __future__ import annotations

import numpy as np

from ..field import gather_ranges, range_node_counts
from ..interface import UNALLOC, watermark_pages
from ..machines import Machine
from .pagemap import NodeBits, move_pages, pages_by_byte, pages_not_on, relocate_ranges

#: pages per block of the per-block node counts (`Memory.blocks`): one 2 MiB huge page
#: of 4 KiB pages, so policies that keep per-huge-page state read them directly
BLOCK = 512
#: page indexes gathered per numpy pass (bounds the temporaries)
_BATCH = 1 << 22


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
        #: of `held`, the frames of pages nobody accesses that reclaim may demote (another
        #: process's cold pages, a tmpfs file's): `Simulation.reclaim` takes them first
        self.idle = np.zeros(machine.nnodes, dtype=np.int64)
        self.wmark_min, self.wmark_low, self.wmark_high = watermark_pages(
            self.capacity, (wmark_min, wmark_low, wmark_high))
        #: pages of each node in each BLOCK-page block of addresses, kept through every
        #: placement, free and move, so counts over address ranges cost O(blocks +
        #: BLOCK per range end), not a pass over the pages: 4 bytes per node
        #: per 512 pages
        self.blocks = np.zeros((-(-self.npages // BLOCK), machine.nnodes), dtype=np.int32)
        self._cum = None
        #: the page map as one bitmap per node (`pagemap.NodeBits`), built at the first
        #: CLOCK-hand scan and kept from then on (runs without kswapd never pay for it)
        self._bits = None

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
        if self._bits is not None:
            self._bits.fill(start, end, node)
        self.used[node] += n
        b = np.arange(start // BLOCK, (end - 1) // BLOCK + 1)
        self.blocks[b, node] += (np.minimum((b + 1) * BLOCK, end)
                                 - np.maximum(b * BLOCK, start)).astype(np.int32)
        self._cum = None

    def release_range(self, start: int, end: int) -> np.ndarray:
        """Free pages [start, end); returns the count freed per node."""
        k = self.machine.nnodes
        freed = np.zeros(k, dtype=np.int64)
        pos = start  # in batches of pages ending at block bounds: bounded temporaries
        while pos < end:
            e = min(end, pos - pos % BLOCK + _BATCH)
            b0 = pos // BLOCK
            key = (np.arange(pos, e) // BLOCK - b0) * (k + 1) + np.minimum(self.node[pos:e], k)
            per = np.bincount(key, minlength=((e - 1) // BLOCK + 1 - b0) * (k + 1))
            per = per.reshape(-1, k + 1)[:, :k]
            self.blocks[b0:(e - 1) // BLOCK + 1] -= per.astype(np.int32)
            freed += per.sum(axis=0)
            pos = e
        self._cum = None
        seg = self.node[start:end]
        seg[:] = UNALLOC
        if self._bits is not None:
            self._bits.clear(start, end)
        self.used -= freed
        return freed

    def move(self, pages: np.ndarray, cur: np.ndarray, dsts: np.ndarray) -> None:
        """pages[i] (distinct, on cur[i]) now on dsts[i]: the page map, the node
        bitmaps, the pages per node and the block counts, in one compiled pass
        (`pagemap.move_pages`)."""
        self._cum = None
        if len(pages) == 0:
            return
        move_pages(self.node, None if self._bits is None else self._bits.bits,
                   self.blocks, self.used, np.asarray(pages, dtype=np.int64),
                   np.asarray(cur, dtype=np.uint8), np.asarray(dsts, dtype=np.uint8),
                   BLOCK)

    def move_ranges(self, starts, ends, dst: int, room: int, flags, mask: int, nr, field,
                    rank, epoch, stamp: int):
        """The first `room` allocated pages of disjoint ranges not on dst (range by
        range) now on dst: `move` of them, with the engine's per-page accounting of the
        same pass (`pagemap.relocate_ranges`, which returns it)."""
        self._cum = None
        return relocate_ranges(self.node, None if self._bits is None else
                               self._bits.bits, self.blocks, self.used, BLOCK,
                               flags, mask, nr, starts, ends, dst, room, field,
                               rank, epoch, stamp)

    def node_bits(self) -> NodeBits:
        """The page map as one bitmap per node (built at the first call, then kept)."""
        if self._bits is None:
            self._bits = NodeBits(self.node, self.machine.nnodes)
        return self._bits

    def pages_on(self, node: int, start: int, limit: int, flags=None, mask: int = 0,
                 value: int = 0, sel=None, sel_on: bool = True, passes=None):
        """Up to `limit` pages on `node` (and, given `flags`, with flags & mask ==
        value; given the bitmap `sel`, with their bit set, or clear if not `sel_on`),
        scanning addresses from `start` and wrapping (a CLOCK hand over the node's
        pages). Returns (pages, next hand position, addresses scanned). The scan
        goes by windows that start near the need and double (a window holding a hit past
        the limit ends after the last page taken), reading the node's bitmap
        (`pagemap.NodeBits`: 64 addresses per word, only the node's pages looked at).
        Given `passes` (a hand's `PassTimes`), a fourth item: (`passes.index(pages)`, the
        least of those pass times), found in the same pass."""
        return self.node_bits().pages_on(node, start, limit, flags, mask, value, sel,
                                         sel_on, passes)

    # -- counts over address ranges, from the blocks ------------------------------------
    def _cumulative(self) -> np.ndarray:
        """Pages per node in blocks [0, b), for b = 0..nblocks (cached until a change)."""
        if self._cum is None:
            self._cum = np.zeros((len(self.blocks) + 1, self.blocks.shape[1]), np.int64)
            np.cumsum(self.blocks, axis=0, out=self._cum[1:])
        return self._cum

    def _direct_counts(self, starts, ends) -> np.ndarray:
        """Pages per node (last column: unallocated) in each [starts[i], ends[i]), read
        from the page map."""
        return range_node_counts(self.node, starts, ends, self.machine.nnodes)

    def allocated_in(self, starts, ends):
        """The allocated pages of each [starts[i], ends[i]) in address order, and how
        many each range holds."""
        pages, n = [], np.zeros(len(starts), dtype=np.int64)
        for i, j, idx, row in gather_ranges(starts, ends, _BATCH):
            ok = self.node[idx] != UNALLOC
            pages.append(idx[ok])
            n[i:j] += np.bincount(row[ok], minlength=j - i)
        return (np.concatenate(pages) if pages else np.zeros(0, np.int64)), n

    def counts_before(self, points) -> np.ndarray:
        """Pages of each node in [0, p) for each p of `points` (n x nnodes): the blocks
        before p's block, plus p's block up to p read from the page map."""
        p = np.asarray(points, dtype=np.int64)
        q = (p // BLOCK) * BLOCK
        part = self._direct_counts(q, p)[:, :-1]
        return self._cumulative()[p // BLOCK] + part

    def range_counts(self, starts, ends) -> np.ndarray:
        """Pages of each node (n x nnodes) in each [starts[i], ends[i]): a short range
        read from the page map, a long one as the difference of `counts_before`, so the
        cost is O(blocks + sum of min(length, 2 BLOCK)), not O(pages)."""
        starts = np.asarray(starts, dtype=np.int64)
        ends = np.asarray(ends, dtype=np.int64)
        out = np.zeros((len(starts), self.machine.nnodes), dtype=np.int64)
        long = ends - starts > 2 * BLOCK
        out[~long] = self._direct_counts(starts[~long], ends[~long])[:, :-1]
        if long.any():
            out[long] = self.counts_before(ends[long]) - self.counts_before(starts[long])
        return out

    def allocated_before(self, points) -> np.ndarray:
        """Allocated pages in [0, p) for each p of `points`."""
        return self.counts_before(points).sum(axis=1)

    def select_allocated(self, g) -> np.ndarray:
        """The address of the g-th allocated page (0-based, address order) for each g."""
        g = np.asarray(g, dtype=np.int64)
        alloc = self._cumulative().sum(axis=1)
        b = np.searchsorted(alloc, g, side="right") - 1  # block holding it
        out = np.empty(len(g), dtype=np.int64)
        for i in range(len(g)):  # one block read per query
            a = int(b[i]) * BLOCK
            hit = np.flatnonzero(self.node[a:a + BLOCK] != UNALLOC)
            out[i] = a + int(hit[int(g[i] - alloc[b[i]])])
        return out

    def pages_of(self, node: int) -> np.ndarray:
        """The pages on `node`, in address order: only blocks holding some are read."""
        hit = np.flatnonzero(self.blocks[:, node] > 0)
        if 2 * hit.shape[0] > self.blocks.shape[0]:
            return np.flatnonzero(self.node == node)
        out = []
        step = _BATCH // 4 // BLOCK
        for a in range(0, hit.shape[0], step):
            idx = (hit[a:a + step, None] * BLOCK + np.arange(BLOCK)).ravel()
            idx = idx[idx < self.npages]
            out.append(idx[self.node[idx] == node])
        return np.concatenate(out) if out else np.zeros(0, dtype=np.int64)

    def pages_by_byte(self, node: int, byte, lut, buf=None) -> np.ndarray:
        """The pages on `node` ordered by lut[byte[page]], equal keys in address order
        (a stable counting sort; only blocks holding the node's pages are read), in
        `buf` if it is large enough (`pagemap.pages_by_byte`)."""
        return pages_by_byte(self.node, self.blocks, BLOCK, node, byte, lut, buf)

    def pages_not_on(self, starts, ends, nodes):
        """Allocated pages in each [starts[i], ends[i]) not on nodes[i], in range then
        address order, and the range of each. Only blocks holding such pages are read:
        a block whose pages are all on the range's node or free is skipped by its
        counts, so the cost is O(blocks spanned + BLOCK per block read)."""
        return pages_not_on(self.node, self.blocks,
                            np.asarray(starts, dtype=np.int64),
                            np.asarray(ends, dtype=np.int64),
                            np.asarray(nodes, dtype=np.int64), BLOCK)


class PassTimes:
    """When a CLOCK hand last passed each address: a compact interval map (sorted
    boundaries, one time per interval), so per-page state is never stored."""

    def __init__(self, npages: int, t0: float = 0.0):
        self.npages = int(npages)
        self.bounds = np.array([0, self.npages], dtype=np.int64)
        self.times = np.array([t0])

    def get(self, pages) -> np.ndarray:
        return self.times[self.index(pages)]

    def index(self, pages) -> np.ndarray:
        """The interval holding each page: pages[i] was passed at times[index[i]]."""
        i = np.searchsorted(self.bounds, np.asarray(pages, dtype=np.int64), side="right")
        return np.clip(i - 1, 0, self.bounds.shape[0] - 2)

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
