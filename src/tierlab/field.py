"""The rate field: per-page read and write rates, piecewise constant in address.

docs/model.md, "Rate field": every page p has a read rate and a write rate in
accesses per unit of work; the field is a sorted list of disjoint segments (page ranges)
with one rate pair each, so its size follows the number of segments, never the address
space. Pages outside every segment have rate 0. Prefix sums over segments answer range
totals (upper page-table entries, regions) in O(log segments).
"""
from __future__ import annotations

import numpy as np
from .jit import kernel


def uniq(a, counts: bool = False, runs: bool = False):
    """Sorted unique values of an int array (and their counts): np.sort based, much
    faster than np.unique's hash path for millions of int64 values. `runs`: the input is
    a few sorted runs (reclaim batches, scan steps), which the stable sort (timsort)
    takes in linear time (80 k pages: 0.6 ms against 4.9 ms, and 16 ms for np.unique)."""
    a = np.sort(np.asarray(a).ravel(), kind="stable" if runs else None)
    if len(a) == 0:
        return (a, np.zeros(0, dtype=np.int64)) if counts else a
    first = np.concatenate(([True], a[1:] != a[:-1]))
    u = a[first]
    if not counts:
        return u
    idx = np.flatnonzero(first)
    return u, np.diff(np.concatenate((idx, [len(a)])))


#: pages per bincount pass in `range_node_counts`: bincount widens its input to int64,
#: so a 5 TiB segment (1.3e9 pages) in one pass would need 10 GB (the 5 TiB telemetry
#: target is under 4 GiB, docs/benchmarks.md)
_CHUNK = 1 << 24


def range_pages(starts, ends) -> np.ndarray:
    """Every page of the ranges [starts[i], ends[i]), concatenated (vectorised)."""
    starts = np.asarray(starts, dtype=np.int64)
    lens = np.asarray(ends, dtype=np.int64) - starts
    if lens.sum() <= 0:
        return np.zeros(0, dtype=np.int64)
    offs = np.repeat(starts - np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
    return np.arange(int(lens.sum()), dtype=np.int64) + offs


def gather_ranges(starts, ends, batch: int | None = None):
    """The addresses of ranges [starts[i], ends[i]) in batches of about `batch`
    (default `_CHUNK`): yields (i, j, idx, row): ranges i..j-1, their addresses in order
    and each address's range less i (a range longer than a batch comes alone, in
    parts)."""
    batch = batch or _CHUNK
    starts = np.asarray(starts, dtype=np.int64)
    ln = np.asarray(ends, dtype=np.int64) - starts
    cum = np.cumsum(ln)
    i = 0
    while i < len(starts):
        base = int(cum[i - 1]) if i else 0
        j = max(int(np.searchsorted(cum, base + batch, side="right")), i + 1)
        if j == i + 1 and ln[i] > batch:
            e = int(starts[i] + ln[i])
            for a in range(int(starts[i]), e, batch):
                idx = np.arange(a, min(a + batch, e), dtype=np.int64)
                yield i, j, idx, np.zeros(len(idx), dtype=np.int64)
        else:
            part = ln[i:j]
            yield i, j, range_pages(starts[i:j], starts[i:j] + part), \
                np.repeat(np.arange(j - i, dtype=np.int64), part)
        i = j


def range_node_counts_numpy(node: np.ndarray, starts, ends, nnodes: int,
                            batch: int | None = None) -> np.ndarray:
    """`range_node_counts` in batched numpy passes (bincounts of gathered addresses)."""
    out = np.zeros((len(starts), nnodes + 1), dtype=np.int64)
    for i, j, idx, row in gather_ranges(starts, ends, batch):
        out[i:j] += np.bincount(row * (nnodes + 1) + np.minimum(node[idx], nnodes),
                                minlength=(j - i) * (nnodes + 1)).reshape(j - i, nnodes + 1)
    return out


class RateField:
    """Disjoint sorted segments [starts[i], ends[i]) with per-page `read`/`write` rates."""

    __slots__ = ("starts", "ends", "read", "write", "npages", "_cr", "_cw", "_mass")

    def __init__(self, starts, ends, read, write, npages: int):
        self.starts = np.ascontiguousarray(starts, dtype=np.int64)
        self.ends = np.ascontiguousarray(ends, dtype=np.int64)
        self.read = np.ascontiguousarray(read, dtype=np.float64)
        self.write = np.ascontiguousarray(write, dtype=np.float64)
        self.npages = int(npages)
        n = len(self.starts)
        if not (len(self.ends) == len(self.read) == len(self.write) == n):
            raise ValueError("segment arrays differ in length")
        if n:
            if np.any(self.ends <= self.starts) or np.any(self.starts[1:] < self.ends[:-1]):
                raise ValueError("segments must be non-empty, sorted and disjoint")
            if self.starts[0] < 0 or self.ends[-1] > self.npages:
                raise ValueError("segment outside the address space")
            if np.any(self.read < 0) or np.any(self.write < 0):
                raise ValueError("negative rate")
        lengths = self.ends - self.starts
        self._cr = np.concatenate(([0.0], np.cumsum(self.read * lengths)))
        self._cw = np.concatenate(([0.0], np.cumsum(self.write * lengths)))
        self._mass: dict = {}  # `sample`'s cumulative masses, by `which`, once each

    # -- construction -------------------------------------------------------------
    @classmethod
    def empty(cls, npages: int) -> "RateField":
        z = np.zeros(0)
        return cls(z, z, z, z, npages)

    @classmethod
    def from_segments(cls, starts, ends, read, write, npages: int) -> "RateField":
        """Build from possibly overlapping segments; rates of overlaps add up.

        Sort-based (np.unique's hash path in numpy 2.x is ~40x slower on int64 arrays
        of this kind) with bincount difference arrays: O(n log n) in the segments.
        """
        starts = np.asarray(starts, dtype=np.int64)
        ends = np.asarray(ends, dtype=np.int64)
        read = np.broadcast_to(np.asarray(read, dtype=np.float64), starts.shape)
        write = np.broadcast_to(np.asarray(write, dtype=np.float64), starts.shape)
        keep = ends > starts
        starts, ends, read, write = starts[keep], ends[keep], read[keep], write[keep]
        if len(starts) == 0:
            return cls.empty(npages)
        bounds = uniq(np.concatenate((starts, ends)))
        i0 = np.searchsorted(bounds, starts)
        i1 = np.searchsorted(bounds, ends)
        nb = len(bounds) + 1
        r = np.cumsum(np.bincount(i0, read, nb) - np.bincount(i1, read, nb))[:-2]
        w = np.cumsum(np.bincount(i0, write, nb) - np.bincount(i1, write, nb))[:-2]
        # differences of sums leave rounding residue where a segment ends: drop it
        tol = 1e-12 * max(float(read.max()), float(write.max()), 1e-300)
        r[np.abs(r) < tol] = 0.0
        w[np.abs(w) < tol] = 0.0
        s, e = bounds[:-1], bounds[1:]
        nz = (r > 0) | (w > 0)
        return cls(s[nz], e[nz], np.maximum(r[nz], 0), np.maximum(w[nz], 0), npages)

    @classmethod
    def uniform(cls, start: int, end: int, read_total: float, write_total: float,
                npages: int) -> "RateField":
        """Accesses spread evenly over [start, end): totals per unit of work."""
        n = max(end - start, 1)
        return cls([start], [end], [read_total / n], [write_total / n], npages)

    def __add__(self, other: "RateField") -> "RateField":
        return RateField.from_segments(
            np.concatenate((self.starts, other.starts)), np.concatenate((self.ends, other.ends)),
            np.concatenate((self.read, other.read)), np.concatenate((self.write, other.write)),
            max(self.npages, other.npages))

    def scaled(self, factor: float) -> "RateField":
        return RateField(self.starts, self.ends, self.read * factor, self.write * factor,
                         self.npages)

    # -- queries ------------------------------------------------------------------
    @property
    def nsegments(self) -> int:
        return len(self.starts)

    @property
    def total_read(self) -> float:
        return float(self._cr[-1])

    @property
    def total_write(self) -> float:
        return float(self._cw[-1])

    @property
    def total(self) -> float:
        return self.total_read + self.total_write

    def segment_of(self, pages) -> np.ndarray:
        """Index of the segment holding each page, or -1 if the page has rate 0."""
        pages = np.asarray(pages, dtype=np.int64)
        if len(pages) > 4 * len(self.starts) + 1024 and np.all(pages[1:] >= pages[:-1]):
            # sorted pages (a placement's movers): O(segments log pages + pages) runs
            # of segment numbers and -1 for the gaps, no search per page
            edges = np.searchsorted(pages, np.stack((self.starts, self.ends), 1).ravel())
            runs = np.diff(np.concatenate(([0], edges, [len(pages)])))
            val = np.full(len(runs), -1, dtype=np.int64)
            val[1::2] = np.arange(len(self.starts))
            return np.repeat(val, runs)
        i = np.searchsorted(self.starts, pages, side="right") - 1
        ok = i >= 0
        ok[ok] &= pages[ok] < self.ends[i[ok]]
        return np.where(ok, i, -1)

    def rate_of(self, pages):
        """(read, write) rate of each page."""
        i = self.segment_of(pages)
        ok = i >= 0
        r = np.zeros(len(i))
        w = np.zeros(len(i))
        r[ok] = self.read[i[ok]]
        w[ok] = self.write[i[ok]]
        return r, w

    def _cum(self, x, cum, rate):
        x = np.asarray(x, dtype=np.int64)
        i = np.searchsorted(self.starts, x, side="right") - 1
        out = np.zeros(x.shape)
        ok = i >= 0
        ii = i[ok]
        inside = np.minimum(x[ok], self.ends[ii]) - self.starts[ii]
        out[ok] = cum[ii] + rate[ii] * inside
        return out

    def range_sum(self, a, b):
        """(reads, writes) per unit of work summed over pages [a, b), vectorised."""
        return (self._cum(b, self._cr, self.read) - self._cum(a, self._cr, self.read),
                self._cum(b, self._cw, self.write) - self._cum(a, self._cw, self.write))

    def range_total(self, a, b) -> np.ndarray:
        r, w = self.range_sum(a, b)
        return r + w

    def sample(self, rng: np.random.Generator, n: int, which: str = "all") -> np.ndarray:
        """Draw n pages with probability proportional to their `which` rate. The
        segments' cumulative mass is computed once per field and `which` (a PEBS
        sampler draws from one field thousands of times)."""
        got = self._mass.get(which)
        if got is None:
            if which == "read":
                mass = self.read
            elif which == "write":
                mass = self.write
            else:
                mass = self.read + self.write
            mass = mass * (self.ends - self.starts)
            got = self._mass[which] = (np.cumsum(mass), mass.sum())
        cum, tot = got
        if n == 0 or tot <= 0:
            return np.zeros(0, dtype=np.int64)
        seg = np.searchsorted(cum, rng.random(n) * tot, side="right")
        seg = np.minimum(seg, len(cum) - 1)
        lo = self.starts[seg]
        return lo + (rng.random(n) * (self.ends[seg] - lo)).astype(np.int64)

    def per_node_totals(self, node: np.ndarray, nnodes: int):
        """(reads, writes) per unit of work landing on each node, given a per-page node map.

        Pages whose node is >= nnodes (unallocated) count for no node. One pass over the
        pages the segments cover (the reference for the engine's `totals` of the
        block counts, `Memory.range_counts`).
        """
        counts = range_node_counts(node, self.starts, self.ends, nnodes)
        return self.totals(counts[:, :nnodes])

    def totals(self, counts: np.ndarray):
        """(reads, writes) per unit of work on each node from the pages of each node in
        each segment (nsegments x nnodes), e.g. `Memory.range_counts(starts, ends)`."""
        counts = counts.astype(np.float64)
        return self.read @ counts, self.write @ counts


# -- compiled kernels (tierlab.jit) --------------------------------------------
def _range_node_counts_numpy(node_map, starts, ends, nnodes):
    return range_node_counts_numpy(node_map, starts, ends, nnodes)


@kernel(numpy=_range_node_counts_numpy)
def _range_node_counts(node_map, starts, ends, nnodes):
    # pages of each range on each node, last column unallocated (node >= nnodes)
    out = np.zeros((starts.shape[0], nnodes + 1), np.int64)
    for i in range(starts.shape[0]):
        for p in range(starts[i], ends[i]):
            out[i, min(np.int64(node_map[p]), nnodes)] += 1
    return out


def range_node_counts(node_map, starts, ends, nnodes: int) -> np.ndarray:
    """Pages of each range [starts[i], ends[i]) of a per-page node map on each node
    0..nnodes-1 and (last column) unallocated (node >= nnodes): one compiled pass, or
    without numba `range_node_counts_numpy` (batched bincounts)."""
    return _range_node_counts(node_map, np.asarray(starts, dtype=np.int64),
                              np.asarray(ends, dtype=np.int64), int(nnodes))
