"""Generic data structures the simulator's compiled code shares: sorts and searches,
bitsets over page numbers, the page hash map, tiers of sorted runs and the calendar
queue of hint faults. Each returns exactly what the numpy form it stands for returns
(tests/test_kernels.py checks them against numpy).

- `argsort_stable`, `merge_sorted`, `argsort_untied`: sorts of (key, index) pairs (an
  LSD radix sort, a one-pass merge, numpy's SIMD quicksort where keys rarely tie);
  `unique_counts`, `unique_event_counts`: sorted values with their counts;
  `sorted_find`: sorted queries into sorted keys by a galloping walk;
- `PageBits`, `SlotBits`, `unique_in_order`: bitsets of pages (one bit, or one of k
  slots, per page) and a bitset pass that drops repeats in the caller's order;
- `PageMap`: an open-addressing hash map from page numbers to small values;
- `SortedRun`, `push_tiered`, `take_through`: a logarithmic tier of sorted runs;
- `FaultCalendar`: a calendar queue of (work, page) entries, sorted only where a run
  reaches them.
"""
from __future__ import annotations

import math
import sys

import numpy as np

from .jit import f2u, helper, kernel, numba_jit, u2f


# -- the Python sources numba compiles (valid Python, run as such by nothing else) ----
@helper(inline=True)
def _upper(a, x, lo, hi):
    # the first index in [lo, hi) with a[i] > x (hi if none): searchsorted "right"
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] <= x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@helper(inline=True)
def _lower(a, x, lo, hi):
    # the first index in [lo, hi) with a[i] >= x (hi if none): searchsorted "left"
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@helper
def _upper_near(a, x, q, lo, hi):
    # _upper(a, x, lo, hi) given a guess q in [lo, hi] that a[q - 1] <= x: galloping
    # forward from q (O(log(answer - q)) for queries in ascending order: IDT's sampled
    # pages, a hand's pages), else searching [lo, hi)
    if q > lo and x < a[q - 1]:
        return _upper(a, x, lo, hi)
    if q >= hi or x < a[q]:
        return q
    b, step = q + 1, 1
    while b < hi and a[b] <= x:
        q = b
        step *= 2
        b = q + step
    return _upper(a, x, q + 1, min(b, hi))


@helper
def _runs_order(keys):
    # np.argsort(keys, kind="stable") for keys without NaN, by merging the maximal
    # non-decreasing runs pairwise (a stable natural merge sort: n log(runs))
    n = keys.shape[0]
    bounds = np.empty(n + 1, np.int64)
    nr = 0
    bounds[0] = 0
    for i in range(1, n):
        if keys[i] < keys[i - 1]:
            nr += 1
            bounds[nr] = i
    if n:
        nr += 1
    bounds[nr] = n
    order = np.arange(n)
    if nr <= 1:
        return order
    k = keys.copy()
    tmp = np.empty(n, np.int64)
    ktmp = np.empty(n, keys.dtype)
    while nr > 1:
        m = 0
        for r in range(0, nr, 2):
            lo = bounds[r]
            hi = bounds[min(r + 2, nr)]
            mid = bounds[r + 1] if r + 1 < nr else hi
            i, j, o = lo, mid, lo
            while i < mid and j < hi:  # branch-free, as `merge_sorted`
                x1, x2 = k[i], k[j]
                c = x2 < x1
                tmp[o] = order[j] if c else order[i]
                ktmp[o] = x2 if c else x1
                j += np.int64(c)
                i += 1 - np.int64(c)
                o += 1
            while i < mid:
                tmp[o], ktmp[o] = order[i], k[i]
                i += 1
                o += 1
            while j < hi:
                tmp[o], ktmp[o] = order[j], k[j]
                j += 1
                o += 1
            bounds[m] = lo
            m += 1
        bounds[m] = n
        nr = m
        order, tmp = tmp, order
        k, ktmp = ktmp, k
    return order


@kernel
def _argsort_bucket(keys, order, out):
    # the stable argsort of keys into order (and the keys in it into out) by a
    # bucket sort: one bucket per key over [min, max], filled in index order, then an
    # insertion sort (strict >: ties keep their order) within each; False (nothing
    # promised) if a key is not finite or a bucket holds more than BUCKET_CAP keys
    # (keys far from uniform: insertion would be quadratic)
    n = keys.shape[0]
    lo = keys[0]
    hi = keys[0]
    for i in range(n):
        k = keys[i]
        if not (k - k == 0.0):  # NaN or +-inf
            return False
        lo = min(lo, k)
        hi = max(hi, k)
    span = hi - lo
    scale = n / span if span > 0.0 else 0.0
    if not (span - span == 0.0 and scale - scale == 0.0):  # either overflows
        return False
    bk = np.empty(n, np.int32)
    cnt = np.zeros(n + 1, np.int64)
    for i in range(n):
        b = min(int((keys[i] - lo) * scale), n - 1)
        bk[i] = b
        cnt[b + 1] += 1
    for b in range(n):
        if cnt[b + 1] > BUCKET_CAP:
            return False
        cnt[b + 1] += cnt[b]
    for i in range(n):
        b = bk[i]
        order[cnt[b]] = i
        cnt[b] += 1
    start = 0
    for b in range(n):
        end = cnt[b]
        for j in range(start + 1, end):
            oi = order[j]
            k = keys[oi]
            m = j - 1
            while m >= start and keys[order[m]] > k:
                order[m + 1] = order[m]
                m -= 1
            order[m + 1] = oi
        start = end
    for j in range(n):
        out[j] = keys[order[j]]
    return True


@kernel
def _argsort_stable(keys):
    n = keys.shape[0]
    # float64 -> uint64 of the same order (numpy's: -0.0 == 0.0, every NaN last)
    k = np.empty(n, np.uint64)
    bits = keys.view(np.uint64)
    sign = np.uint64(1) << np.uint64(63)
    for i in range(n):
        x = keys[i]
        if x != x:
            k[i] = np.uint64(0xFFFFFFFFFFFFFFFF)
        elif x == 0.0:
            k[i] = sign
        else:
            b = bits[i]
            k[i] = ~b if b & sign else b | sign
    r = 11
    nb = 1 << r
    npass = 6
    mask = np.uint64(nb - 1)
    hist = np.zeros((npass, nb), np.int64)
    for i in range(n):
        v = k[i]
        for p in range(npass):
            hist[p, (v >> np.uint64(p * r)) & mask] += 1
    order = np.arange(n)
    tmp = np.empty(n, np.int64)
    ktmp = np.empty(n, np.uint64)
    pos = np.empty(nb, np.int64)
    for p in range(npass):
        h = hist[p]
        sh = np.uint64(p * r)
        if n == 0 or h[(k[0] >> sh) & mask] == n:
            continue  # a digit every key shares
        s = 0
        for d in range(nb):
            pos[d] = s
            s += h[d]
        for i in range(n):
            v = k[i]
            d = (v >> sh) & mask
            q = pos[d]
            tmp[q] = order[i]
            ktmp[q] = v
            pos[d] = q + 1
        order, tmp = tmp, order
        k, ktmp = ktmp, k
    return order


@kernel
def _merge_sorted(w1, p1, a1, w2, p2, a2):
    n1, n2 = w1.shape[0], w2.shape[0]
    w = np.empty(n1 + n2, w1.dtype)
    p = np.empty(n1 + n2, p1.dtype)
    a = np.empty(n1 + n2, a1.dtype)
    i = j = o = 0
    # branch-free selects: random keys would mispredict a branch half the time
    while i < n1 and j < n2:
        x1, x2 = w1[i], w2[j]
        c = x2 < x1
        w[o] = x2 if c else x1
        p[o] = p2[j] if c else p1[i]
        a[o] = a2[j] if c else a1[i]
        j += np.int64(c)
        i += 1 - np.int64(c)
        o += 1
    while i < n1:
        w[o], p[o], a[o] = w1[i], p1[i], a1[i]
        i += 1
        o += 1
    while j < n2:
        w[o], p[o], a[o] = w2[j], p2[j], a2[j]
        j += 1
        o += 1
    return w, p, a


#: below this size numpy's own sort is as fast and needs no compiled code
SMALL = 256


#: above this size a bucket sort's scatter leaves the cache and is no faster than numpy
BUCKET_MAX = 1 << 16


#: a bucket sort gives up when a bucket holds more keys (uniform keys: about 7 at most)
BUCKET_CAP = 24


def argsort_stable(keys) -> np.ndarray:
    """`np.argsort(keys, kind="stable")` for a float64 array (radix sort)."""
    keys = np.ascontiguousarray(keys, dtype=np.float64)
    if keys.shape[0] <= SMALL:
        return np.argsort(keys, kind="stable")
    return _argsort_stable(keys)


def merge_sorted(w1, p1, a1, w2, p2, a2):
    """Stable merge of two sorted batches (keys w, payloads p and a)."""
    if w1.shape[0] == 0 or w2.shape[0] == 0 or w1[-1] <= w2[0]:
        return (np.concatenate((w1, w2)), np.concatenate((p1, p2)),
                np.concatenate((a1, a2)))
    return _merge_sorted(w1, p1, a1, w2, p2, a2)


def argsort_untied(keys):
    """(`np.argsort(keys, kind="stable")`, the keys in that order) of float64 keys.
    From SMALL to BUCKET_MAX keys, a bucket sort (`_argsort_bucket`; for
    near-uniform keys such as a calendar bucket's fault works or a poll's PEBS sample
    works, about half numpy's time: benchmarks/bench_sorts.py), which gives up on
    far-from-uniform keys; otherwise numpy's SIMD quicksort
    (18-24 ns an entry at 65,536, against 28-36 for the radix sort and more for
    numpy's stable sort): it is not stable, but without equal keys (or NaN) there is
    one sorted order, so its result is the stable one; where the sorted keys show a
    tie, the radix sort (`argsort_stable`) decides. For keys that rarely tie: fault
    works, PEBS sample times."""
    keys = np.ascontiguousarray(keys, dtype=np.float64)
    n = keys.shape[0]
    if SMALL <= n <= BUCKET_MAX and numba_jit():
        order, k = np.empty(n, np.int64), np.empty(n)
        if _argsort_bucket(keys, order, k):
            return order, k
    order = np.argsort(keys)
    k = keys[order]
    if k.shape[0] > 1 and (k[-1] != k[-1] or not bool(np.all(k[1:] != k[:-1]))):
        order = argsort_stable(keys)
        k = keys[order]
    return order, k


@kernel
def _run_event_counts(s, ev, nev):
    # the distinct values of sorted s and, for each, how many of its entries carry
    # each event 0 .. nev - 1 (ev in the same order as s)
    n = s.shape[0]
    m = 0
    for i in range(n):
        if i == 0 or s[i] != s[i - 1]:
            m += 1
    u = np.empty(m, s.dtype)
    c = np.zeros((m, nev), np.int64)
    j = -1
    for i in range(n):
        if i == 0 or s[i] != s[i - 1]:
            j += 1
            u[j] = s[i]
        c[j, ev[i]] += 1
    return u, c


def unique_counts(a):
    """`np.unique(a, return_counts=True)` of integers: numpy's sort, then the runs
    counted in one compiled pass, where numpy's unique makes five more over the sorted
    copy (MEMTIS's sample pages; the sort is most of the cost)."""
    a = np.asarray(a)
    if a.dtype.kind not in "iu" or not numba_jit():
        return np.unique(a, return_counts=True)
    s = np.sort(a.ravel())
    u, c = _run_event_counts(s, np.zeros(s.shape[0], np.int8), np.int64(1))
    return u, c[:, 0].copy()


def unique_event_counts(p, ev, nev: int):
    """(np.unique(p), counts) with counts[i, e] the entries of the i-th distinct page
    whose event ev is e (0 <= e < nev): what np.unique(p, return_inverse=True) and a
    bincount of inverse x nev + ev give, by numpy's sort of the pages and one compiled
    pass over the runs (PEBS's batches of samples)."""
    p = np.asarray(p, dtype=np.int64)
    ev = np.asarray(ev)
    if not numba_jit():
        u, inv = np.unique(p, return_inverse=True)
        return u, np.bincount(inv * nev + ev, minlength=nev * len(u)).reshape(len(u), nev)
    o = np.argsort(p)
    return _run_event_counts(p[o], ev[o], np.int64(nev))


def _sorted_find_numpy(keys, q, pos, hit):
    pos[:] = np.searchsorted(keys, q)
    ok = pos < keys.shape[0]
    hit[:] = False
    hit[ok] = keys[pos[ok]] == q[ok]


@kernel(numpy=_sorted_find_numpy)
def _sorted_find(keys, q, pos, hit):
    # for ascending q and ascending unique keys: pos[i] = searchsorted(keys, q[i],
    # "left"), hit[i] = pos[i] < len(keys) and keys[pos[i]] == q[i]; a galloping walk
    # from the previous answer (O(n log(m / n)) for n queries into m keys)
    m = keys.shape[0]
    j = 0
    for i in range(q.shape[0]):
        x = q[i]
        if j < m and keys[j] < x:
            lo, step = j, 1
            hi = lo + 1
            while hi < m and keys[hi] < x:
                lo = hi
                step *= 2
                hi = lo + step
            j = _lower(keys, x, lo + 1, min(hi, m))
        pos[i] = j
        hit[i] = j < m and keys[j] == x


def sorted_find(keys, q):
    """(pos, hit) of ascending queries q in ascending unique keys: pos =
    searchsorted(keys, q), hit where keys[pos] == q, by one galloping walk (an
    AccessedBits level's lookup of a young filter's 45,000 pages in runs of 100,000)."""
    pos = np.empty(q.shape[0], np.int64)
    hit = np.empty(q.shape[0], np.bool_)
    _sorted_find(keys, q, pos, hit)
    return pos, hit


@helper(inline=True)
def _word_mask(p, end):
    # (w, m): the word holding bit p and the mask of its bits in [p, end)
    w = p >> 6
    lo = p & 63
    hi = min(end - (w << 6), 64)
    if hi - lo == 64:
        return w, ~np.uint64(0)
    return w, ((np.uint64(1) << np.uint64(hi - lo)) - np.uint64(1)) << np.uint64(lo)


@kernel
def _bits_range(bits, row, start, end, value):
    # rows row (or every row if row < 0) of [start, end) set to value
    r0, r1 = (row, row + 1) if row >= 0 else (0, bits.shape[0])
    p = start
    while p < end:
        w, m = _word_mask(p, end)
        for r in range(r0, r1):
            if value:
                bits[r, w] |= m
            else:
                bits[r, w] &= ~m
        p = (w + 1) << 6


@kernel
def _bits_set(row, pages, value):
    one = np.uint64(1)
    for i in range(pages.shape[0]):
        p = pages[i]
        if value:
            row[p >> 6] |= one << np.uint64(p & 63)
        else:
            row[p >> 6] &= ~(one << np.uint64(p & 63))


@kernel
def _bits_get(row, pages, out):
    for i in range(pages.shape[0]):
        p = pages[i]
        out[i] = ((row[p >> 6] >> np.uint64(p & 63)) & np.uint64(1)) != 0


@kernel
def _bits_any(row, start, end):
    # whether a bit of [start, end) is set
    p = start
    while p < end:
        w, m = _word_mask(p, end)
        if row[w] & m:
            return True
        p = (w + 1) << 6
    return False


def page_dtype(npages: int):
    """Page numbers in 4 bytes while every page fits (5 TiB of 4 KiB pages do), else 8."""
    return np.int32 if int(npages) < 2**31 else np.int64


class PageBits:
    """One bit per page (a page flag as a bitmap, 1/8 byte per page), for
    `NodeBits.pages_on`'s `sel`: a hand then skips 64 addresses at a time where the
    flag does not match, instead of testing each of the node's pages."""

    def __init__(self, on):
        on = np.asarray(on, dtype=bool)
        packed = np.packbits(on, bitorder="little")
        words = np.zeros(-(-on.shape[0] // 64) * 8, np.uint8)
        words[:packed.shape[0]] = packed
        self.words = words.view(np.uint64)

    @classmethod
    def zeros(cls, n: int) -> "PageBits":
        """Every bit clear, without a pass over n flags (the words stay untouched
        zero pages until set)."""
        self = cls.__new__(cls)
        self.words = np.zeros(-(-int(n) // 64), np.uint64)
        return self

    def set(self, pages, value: bool) -> None:
        _bits_set(self.words, np.asarray(pages, dtype=np.int64), bool(value))

    def get(self, pages) -> np.ndarray:
        """Each page's bit, as bools."""
        pages = np.asarray(pages, dtype=np.int64)
        out = np.empty(pages.shape[0], np.bool_)
        _bits_get(self.words, pages, out)
        return out

    def any(self, start: int, end: int) -> bool:
        """Whether a page of [start, end) has its bit set."""
        return bool(_bits_any(self.words, int(start), int(end)))

    def clear(self, start: int, end: int) -> None:
        _bits_range(self.words.reshape(1, -1), 0, int(start), int(end), False)


class SlotBits:
    """One bitmap per value of a small per-page field (MGLRU's generations, seq % 4):
    bit p of row s set iff page p's field holds slot s, so that a hand over one slot's
    pages reads 64 addresses a word (`NodeBits.pages_on`'s `sel`), nslots/8 bytes a
    page. The owner of the field moves the bits with every write to it."""

    def __init__(self, npages: int, nslots: int):
        self.rows = np.zeros((int(nslots), -(-int(npages) // 64)), np.uint64)

    def fill(self, start: int, end: int, slot) -> None:
        """Pages [start, end) in `slot` (None: in none)."""
        _bits_range(self.rows, -1, int(start), int(end), False)
        if slot is not None:
            _bits_range(self.rows, int(slot), int(start), int(end), True)

    def move(self, pages, old, new) -> None:
        """`pages` from slot `old` to slot `new` (either None: none)."""
        pages = np.asarray(pages, dtype=np.int64)
        if old is not None:
            _bits_set(self.rows[int(old)], pages, False)
        if new is not None:
            _bits_set(self.rows[int(new)], pages, True)

    def slot_of(self) -> np.ndarray:
        """Every page's slot (-1: none), unpacked from the rows (for checks)."""
        n = self.rows.shape[1] * 64
        out = np.full(n, -1, np.int64)
        for s in range(self.rows.shape[0]):
            on = np.unpackbits(self.rows[s].view(np.uint8), bitorder="little").astype(bool)
            out[on] = s
        return out


def _first_seen_numpy(pages, seen):
    _, first = np.unique(pages, return_index=True)
    keep = np.zeros(pages.shape[0], np.bool_)
    keep[first] = True
    return keep, pages.shape[0] - first.shape[0]


@kernel(numpy=_first_seen_numpy)
def _first_seen(pages, seen):
    keep = np.ones(pages.shape[0], np.bool_)
    dup = 0
    one = np.uint64(1)
    for i in range(pages.shape[0]):
        p = pages[i]
        b = one << np.uint64(p & 63)
        if seen[p >> 6] & b:
            keep[i] = False
            dup += 1
        else:
            seen[p >> 6] |= b
    for i in range(pages.shape[0]):  # leave the scratch clear
        p = pages[i]
        seen[p >> 6] &= ~(one << np.uint64(p & 63))
    return keep, dup


_seen = np.zeros(0, np.uint64)  # a clear bitset over page numbers, grown on demand


def unique_in_order(pages: np.ndarray) -> np.ndarray:
    """`pages` (int64) without repeats, each at its first occurrence: one pass over a
    bitset of page numbers, where the unique-with-indexes route sorts (the engine's
    move requests, listed by priority)."""
    global _seen
    if pages.shape[0] < 2 or bool(np.all(pages[1:] > pages[:-1])):
        return pages
    need = (int(pages.max()) >> 6) + 1
    if _seen.shape[0] < need:
        _seen = np.zeros(max(need, 2 * _seen.shape[0]), np.uint64)
    keep, dup = _first_seen(pages, _seen)
    return pages[keep] if dup else pages


class Scratch:
    """Work arrays kept between calls of kernels that fill them (`LruLists.first`,
    `FaultCalendar`, `TierShares`, a NUMA scan step's pages): a fresh array of many
    entries is a fresh mapping, paid again in page faults at every call. Each slot is
    grown to the largest need seen (at least doubling), never shrunk."""

    def __init__(self):
        self.arrays = []

    def get(self, *specs):
        """For each (dtype, n) of `specs`, n entries of that slot's array (a view of the
        kept one, valid until the next `get`)."""
        while len(self.arrays) < len(specs):
            self.arrays.append(None)
        for i, (dtype, n) in enumerate(specs):
            a = self.arrays[i]
            if a is None or a.dtype != dtype or a.shape[0] < n:
                old = 0 if a is None else a.shape[0]
                self.arrays[i] = np.empty(max(int(n), 2 * old), dtype)
        return tuple(self.arrays[i][:n] for i, (_, n) in enumerate(specs))


@helper(inline=True)
def _phash(p, m):
    # page p's home slot in a table of m + 1 slots (a power of two): a multiply, then
    # its upper bits folded down (a product's low bits depend only on p's low bits)
    x = int(p) * 73244475
    return (x ^ (x >> 29)) & m


@kernel
def _pmap_put(keys, vals, pages, idx):
    # pages (none in the table) -> idx, by linear probing from each one's home slot
    m = keys.shape[0] - 1
    for i in range(pages.shape[0]):
        p = pages[i]
        h = _phash(p, m)
        while keys[h] != -1:
            h = (h + 1) & m
        keys[h] = p
        vals[h] = idx[i]


@helper(inline=True)
def _pmap_find(keys, p, m):
    # page p's slot in the table (m + 1 slots), -1 if absent: its probe run from its
    # home slot up to the first empty one
    h = _phash(p, m)
    while keys[h] != -1:
        if keys[h] == p:
            return h
        h = (h + 1) & m
    return -1


@kernel
def _pmap_get(keys, vals, pages, out):
    # out[i] = the value of pages[i], -1 if absent
    m = keys.shape[0] - 1
    for i in range(pages.shape[0]):
        h = _pmap_find(keys, pages[i], m)
        out[i] = vals[h] if h >= 0 else -1


@kernel
def _pmap_pop(keys, vals, pages, out):
    # `_pmap_get`, each page found then taken out: the entries after it in its probe
    # run shift back over the hole where their home slot allows (Knuth's algorithm R,
    # TAOCP 6.4), so no tombstone is left; returns how many were found
    m = keys.shape[0] - 1
    found = 0
    for i in range(pages.shape[0]):
        h = _pmap_find(keys, pages[i], m)
        out[i] = -1
        if h < 0:
            continue
        out[i] = vals[h]
        found += 1
        j = h
        while True:
            j = (j + 1) & m
            if keys[j] == -1:
                break
            k = _phash(keys[j], m)
            # the entry at j stays where its home k lies cyclically in (h, j]
            if (k > h and k <= j) if h <= j else (k > h or k <= j):
                continue
            keys[h] = keys[j]
            vals[h] = vals[j]
            h = j
        keys[h] = -1
    return found


@kernel
def _pmap_remap(keys, vals, new):
    # every value v in the table becomes new[v]
    for h in range(keys.shape[0]):
        if keys[h] != -1:
            vals[h] = new[vals[h]]


class PageMap:
    """A map from pages to integers for a set of pages far smaller than memory (NOMAD's
    shadowed pages): open addressing with linear probing in a power-of-two table kept
    at most 3/4 full, deletions by backward shift (no tombstones). Keys in the pages'
    dtype (`page_dtype`), -1 for an empty slot; values of `vdt`. Lookups of absent
    pages probe to the next empty slot, so callers filter by a `PageBits` first."""

    LOAD = 0.75

    def __init__(self, pdt, vdt, cap: int = 1024):
        self.pdt, self.vdt = pdt, vdt
        self.keys = np.full(int(cap), -1, pdt)
        self.vals = np.zeros(int(cap), vdt)
        self.n = 0

    def __len__(self):
        return self.n

    def _grow(self, need: int) -> None:
        cap = self.keys.shape[0]
        if need <= self.LOAD * cap:
            return
        while need > self.LOAD * cap:
            cap *= 2
        full = self.keys != -1
        k, v = self.keys[full], self.vals[full]
        self.keys = np.full(cap, -1, self.pdt)
        self.vals = np.zeros(cap, self.vdt)
        _pmap_put(self.keys, self.vals, k, v)

    def put(self, pages, vals) -> None:
        """pages (distinct, none in the map) -> vals."""
        pages = np.asarray(pages, dtype=self.pdt)
        self._grow(self.n + pages.shape[0])
        _pmap_put(self.keys, self.vals, pages, np.asarray(vals, dtype=self.vdt))
        self.n += pages.shape[0]

    def get(self, pages) -> np.ndarray:
        """Each page's value, -1 where absent (int64)."""
        pages = np.asarray(pages, dtype=self.pdt)
        out = np.empty(pages.shape[0], np.int64)
        _pmap_get(self.keys, self.vals, pages, out)
        return out

    def pop(self, pages) -> np.ndarray:
        """`get`, and the pages found taken out of the map (a page listed twice is
        found at its first listing only)."""
        pages = np.asarray(pages, dtype=self.pdt)
        out = np.empty(pages.shape[0], np.int64)
        self.n -= int(_pmap_pop(self.keys, self.vals, pages, out))
        return out

    def remap(self, new) -> None:
        """Every value v becomes new[v]."""
        _pmap_remap(self.keys, self.vals, np.asarray(new, dtype=self.vdt))


class SortedRun:
    """Entries sorted by key (`keys`), with their pages and a second payload (`tag`: a
    hint fault's arm index, a NOMAD shadow's generation), the first `head` taken."""

    __slots__ = ("keys", "pages", "tag", "head")

    def __init__(self, keys, pages, tag):
        self.keys, self.pages, self.tag, self.head = keys, pages, tag, 0

    def __len__(self):
        return self.keys.shape[0] - self.head

    def live(self):
        h = self.head
        return self.keys[h:], self.pages[h:], self.tag[h:]


def push_tiered(runs: list, run: SortedRun, cap: float = math.inf) -> int:
    """Append `run` to `runs` (size-tiered): merge the last two while the one before
    is at most twice as long as the last and both together at most `cap` (`merge_sorted`,
    stable: the earlier run first at equal keys). Returns the longest run a merge made
    (0 if none)."""
    if len(run) == 0:
        return 0
    runs.append(run)
    made = 0
    while len(runs) > 1 and len(runs[-2]) <= 2 * len(runs[-1]) \
            and len(runs[-2]) + len(runs[-1]) <= cap:
        r2, r1 = runs.pop(), runs.pop()
        runs.append(SortedRun(*merge_sorted(*r1.live(), *r2.live())))
        made = max(made, len(runs[-1]))
    return made


def take_through(runs: list, key: float) -> list:
    """Every entry of `runs` with key <= `key`, as each run's prefix (keys, pages, tag),
    taken out of it: a run more than half taken (past 4,096 entries) is copied down, an
    emptied one removed from `runs`."""
    out = []
    for r in runs:
        h = r.head
        k = int(np.searchsorted(r.keys[h:], key, side="right"))
        if k:
            out.append((r.keys[h:h + k], r.pages[h:h + k], r.tag[h:h + k]))
            r.head = h = h + k
            if h * 2 > r.keys.shape[0] and h > 4096:
                r.keys, r.pages, r.tag = r.keys[h:].copy(), r.pages[h:].copy(), r.tag[h:].copy()
                r.head = 0
    runs[:] = [r for r in runs if len(r)]
    return out


@helper
def _cal_next_block(j, nxt, head, tail, free, nfree):
    # a block from the free stack chained at the end of bucket j's chain; returns it
    top = nfree[0] - 1
    blk = free[top]
    nfree[0] = top
    nxt[blk] = -1
    t = tail[j]
    if t < 0:
        head[j] = blk
    else:
        nxt[t] = blk
    tail[j] = blk
    return blk


@helper
def _cal_place(w, pg, am, n, b, r, w0, div, base, scale, lim, nb, bsz, pwl, pwm, pp, pa,
               bhi, bfill, opn, nxt, head, tail, cnt, free, nfree, near_w, near_p, near_a,
               q):
    # entries [0, n) of (w, pg, am) by bucket coordinate x = (w - base) * scale (with
    # `div`, their works are w0 + b / r, numpy's order of operations): those with x <
    # lim (at or before the current bucket) to near_* from index q, in input order
    # (the new q returned); x >= nb or NaN to bucket nb (past the window); else to
    # bucket floor(x), appended to its chain of blocks (new blocks from the free
    # stack), in one pass.
    # An entry goes into the open block of its slot, or a new block chained to its
    # bucket when that one is full or holds another key. The key is the work's top 16
    # bits (sign, exponent, 4 bits of mantissa), kept once per block (bhi); the entry
    # keeps the low 48 (pwl, pwm). A window bucket holds at most two keys, one of each
    # parity (`FaultCalendar`), so its two slots are by parity; the bucket past the
    # window has one slot per key. The append is written out here: as a helper it cost
    # 94 ns an entry against 17 (numba counts references to its 18 arrays at each
    # call). The entries past the window are counted apart, and the block last
    # appended to is kept with its key and fill in registers (a counter or a fill in
    # memory, incremented at every entry, cost 7 ns an entry).
    past = 0
    cb, cj, ch, cf = np.int32(-1), np.int64(-1), np.uint16(0), np.int32(0)
    for i in range(n):
        wi = w0 + b[i] / r[i] if div else w[i]
        x = (wi - base) * scale
        if x < lim:
            near_w[q] = wi
            near_p[q] = pg[i]
            near_a[q] = am[i]
            q += 1
            continue
        if x < nb:
            j = np.int64(x)
            cnt[j] += 1
        else:  # NaN too
            j = np.int64(nb)
            past += 1
        bits = f2u(wi)
        h = np.uint16(bits >> np.uint64(48))
        if j != cj or h != ch or cf == bsz:  # else the slot's open block is cb
            sl = 2 * nb + np.int64(h) if j == nb else 2 * j + np.int64(h & np.uint16(1))
            blk = opn[sl]
            if cb >= 0:
                bfill[cb] = cf
            if blk < 0 or bfill[blk] == bsz or bhi[blk] != h:
                blk = _cal_next_block(j, nxt, head, tail, free, nfree)
                bhi[blk] = h
                bfill[blk] = 0
                opn[sl] = blk
            cb, cj, ch, cf = blk, j, h, bfill[blk]
        k = np.int64(cb) * bsz + cf
        pwl[k] = np.uint32(bits & np.uint64(0xFFFFFFFF))
        pwm[k] = np.uint16((bits >> np.uint64(32)) & np.uint64(0xFFFF))
        pp[k] = pg[i]
        pa[k] = am[i]
        cf += 1
    if cb >= 0:
        bfill[cb] = cf
    cnt[nb] += past
    return q


@helper
def _cal_unlink(b, bsz, pwl, pwm, pp, pa, bhi, bfill, nxt, free, nfree, ow, op, oa, q):
    # block b's entries copied to (ow, op, oa) from q, their works rebuilt from the
    # block's key and their low 48 bits; the block put back on the free stack; returns
    # the next block of its chain
    s = np.int64(b) * bsz
    top = np.uint64(bhi[b]) << np.uint64(48)
    for i in range(bfill[b]):
        bits = top | (np.uint64(pwm[s + i]) << np.uint64(32)) | np.uint64(pwl[s + i])
        ow[q + i] = u2f(bits)
        op[q + i] = pp[s + i]
        oa[q + i] = pa[s + i]
    free[nfree[0]] = b
    nfree[0] += 1
    return nxt[b]


@helper
def _cal_close(j, nb, opn, head, tail, cnt):
    # bucket j emptied: no chain, no open block
    head[j] = -1
    tail[j] = -1
    cnt[j] = 0
    if j == nb:
        for s in range(2 * nb, opn.shape[0]):
            opn[s] = -1
    else:
        opn[2 * j] = -1
        opn[2 * j + 1] = -1


@kernel
def _cal_push(budget, r, w0, pages, arm, base, scale, lim, nb, bsz, pwl, pwm, pp, pa,
              bhi, bfill, opn, nxt, head, tail, cnt, free, nfree, near_w, near_p, near_a):
    # fault work w0 + budget / r of each entry (numpy's order of operations), placed
    return _cal_place(budget, pages, arm, budget.shape[0], budget, r, w0, True, base, scale,
                      lim, nb, bsz, pwl, pwm, pp, pa, bhi, bfill, opn, nxt, head, tail, cnt,
                      free, nfree, near_w, near_p, near_a, 0)


@kernel
def _cal_rebucket(src, base, scale, lim, nb, bsz, pwl, pwm, pp, pa, bhi, bfill, opn, nxt,
                  head, tail, cnt, free, nfree, bw, bp, ba, ow, op, oa):
    # bucket src's entries (the one past the old window) placed again, in pieces of
    # at most the buffers' size, each piece's blocks freed once copied out (so the
    # entries need no second copy in the pool); returns how many went to (ow, op, oa)
    b = head[src]
    _cal_close(src, nb, opn, head, tail, cnt)
    chunk = bw.shape[0]
    q = 0
    m = 0
    while b >= 0:
        e = bfill[b]
        b = _cal_unlink(b, bsz, pwl, pwm, pp, pa, bhi, bfill, nxt, free, nfree, bw, bp, ba,
                        m)
        m += e
        if b < 0 or m + bsz > chunk:
            q = _cal_place(bw, bp, ba, m, bw, bw, 0.0, False, base, scale, lim, nb, bsz,
                           pwl, pwm, pp, pa, bhi, bfill, opn, nxt, head, tail, cnt, free,
                           nfree, ow, op, oa, q)
            m = 0
    return q


@kernel
def _cal_pop(j, nb, bsz, pwl, pwm, pp, pa, bhi, bfill, opn, nxt, head, tail, cnt, free,
             nfree, ow, op, oa):
    # bucket j's entries into (ow, op, oa), block by block in chain order (so in
    # insertion order among the entries of one key, which equal works share); its
    # blocks back on the free stack
    b = head[j]
    q = 0
    while b >= 0:
        e = bfill[b]
        b = _cal_unlink(b, bsz, pwl, pwm, pp, pa, bhi, bfill, nxt, free, nfree, ow, op, oa,
                        q)
        q += e
    _cal_close(j, nb, opn, head, tail, cnt)
    return q


#: entries a calendar's roll places at a time (64 Ki entries, 1 MiB; at least a block)
ROLL_PIECE = 1 << 16


class FaultCalendar:
    """Scheduled hint faults past the current bucket, unsorted: a calendar queue (R.
    Brown, CACM 1988) of `nbuckets` buckets of fault work over a window [base, top),
    whose windows grow geometrically as a ladder queue's rungs do, plus one bucket for
    the works past `top`. An entry is (fault work, page, arm index), 12 bytes, since the
    pool holds nearly every page at once when the scan covers memory faster than it is
    touched:
    - the arm index takes 2 bytes while every one fits (`fit_arm`; tpp at 10x
      bench_memsim armed 7,986 times in 600 simulated s);
    - the work, a float64, keeps its low 48 bits in the entry and its top 16 (sign,
      exponent and 4 bits of mantissa: its key) once per block, every entry of a block
      sharing them. A window's bucket spans less than a key does (a key at v >= base
      spans over v / 32; a bucket, 15 base / 1024), so it holds at most two keys, of
      either parity, each with its open block; the bucket past the window has an open
      block per key. Works come back bit for bit.
    Entries are stored in blocks of `bsz` chained per bucket; the blocks are a pool
    sized for every page armed at once plus the open blocks, allocated untouched (only
    the blocks ever used become resident), reused from a free stack and grown
    (`_reserve`) only where a window breaks the two-key rule (the first, [0, 1), whose
    buckets span many exponents). Only the buckets the work reaches are sorted
    (`ScheduledHintFaults`): an armed page that never faults costs a bucket append, not
    a sort and its share of merges (tpp at 10x bench_memsim armed 207 M pages, of which
    109 M faulted)."""

    #: each window spans [w, growth x w) of work (tpp at 10x bench_memsim: 4, 16 and 64
    #: took 48, 39 and 41 s side by side; fewer rolls against coarser buckets)
    growth = 16.0
    #: the keys of a work (its top 16 bits): the bucket past the window's open blocks
    KEYS = 1 << 16

    def __init__(self, npages: int, pdt, nbuckets: int = 1024, bsz: int = 64):
        self.nb, self.bsz = int(nbuckets), int(bsz)
        k = self.nb + 1
        nblocks = -(-int(npages) // self.bsz) + 2 * k + self.KEYS
        self.pwl = np.empty(nblocks * self.bsz, np.uint32)
        self.pwm = np.empty(nblocks * self.bsz, np.uint16)
        self.pp = np.empty(nblocks * self.bsz, pdt)
        self.pa = np.empty(nblocks * self.bsz, np.uint16)
        self.bhi = np.empty(nblocks, np.uint16)
        self.bfill = np.empty(nblocks, np.int32)
        self.nxt = np.empty(nblocks, np.int32)
        self.free = np.arange(nblocks - 1, -1, -1, dtype=np.int32)  # block 0 on top
        self.nfree = np.array([nblocks], np.int64)
        self.opn = np.full(2 * self.nb + self.KEYS, -1, np.int32)  # open block per slot
        self.head = np.full(k, -1, np.int32)
        self.tail = np.full(k, -1, np.int32)
        self.cnt = np.zeros(k, np.int64)
        #: window [base, base + nb / scale); cur: the last bucket handed out
        self.base, self.scale, self.cur = 0.0, 0.0, -1
        self._tight = False  # whether each bucket of the window spans at most two keys
        self._buf = Scratch()  # push and roll work arrays (`_scratch`)
        self.new_window(0.0)

    def _state(self):
        """The arrays the kernels update, in their order."""
        return (self.pwl, self.pwm, self.pp, self.pa, self.bhi, self.bfill, self.opn,
                self.nxt, self.head, self.tail, self.cnt, self.free, self.nfree)

    def __len__(self) -> int:
        return int(self.cnt.sum())

    def _used_end(self) -> int:
        """One past the highest block in use (0 if none)."""
        used = np.ones(self.nxt.shape[0], np.bool_)
        used[self.free[:int(self.nfree[0])]] = False
        return int(np.flatnonzero(used)[-1]) + 1 if used.any() else 0

    def fit_arm(self, arm: int) -> None:
        """Make room for arm index `arm`: past 2 bytes, the arm indexes widen to 4 (a
        copy of the blocks up to the highest one in use; the others stay untouched)."""
        if arm <= np.iinfo(self.pa.dtype).max:
            return
        self._regrow(self.nxt.shape[0], pa=np.uint32)

    def _regrow(self, nblocks: int, **dtypes) -> None:
        """The pool's arrays for `nblocks` blocks, of `dtypes` where given (by name),
        holding the blocks up to the highest one in use (the rest stay untouched)."""
        hi = self._used_end()
        grow = nblocks != self.nxt.shape[0]
        for name, per in (("pwl", self.bsz), ("pwm", self.bsz), ("pp", self.bsz),
                          ("pa", self.bsz), ("bhi", 1), ("bfill", 1), ("nxt", 1)):
            a = getattr(self, name)
            if not grow and name not in dtypes:
                continue
            b = np.empty(nblocks * per, dtypes.get(name, a.dtype))
            b[:hi * per] = a[:hi * per]
            setattr(self, name, b)

    def _reserve(self, n: int) -> None:
        """At least n free blocks: where a window's buckets span more than two keys,
        each entry may open a block. The pool grows by copying the blocks up to the
        highest in use; the new blocks go under the free ones."""
        have = int(self.nfree[0])
        if have >= n:
            return
        old = self.nxt.shape[0]
        new = old + max(n - have, old // 2)
        self._regrow(new)
        free = np.empty(new, np.int32)
        free[:new - old] = np.arange(new - 1, old - 1, -1, dtype=np.int32)
        free[new - old:new - old + have] = self.free[:have]
        self.free = free
        self.nfree[0] = have + new - old

    def index(self, w: float) -> float:
        """The bucket coordinate of work w ((w - base) x scale, as the kernel computes
        it): bucket j holds the entries with j <= coordinate < j + 1."""
        return (w - self.base) * self.scale

    def push(self, budget, r, w0: float, pages, arm):
        """Schedule entries at work w0 + budget / r; return (works, pages, arm) of those
        at or before the current bucket, in input order, which the caller keeps sorted
        itself."""
        n = budget.shape[0]
        if not self._tight:
            self._reserve(n)
        sw, sp, sa = self._scratch(n)
        q = _cal_push(budget, r, float(w0), pages, arm, self.base, self.scale,
                      float(self.cur + 1), self.nb, self.bsz, *self._state(),
                      sw, sp, sa)
        return sw[:q].copy(), sp[:q].copy(), sa[:q].copy()

    def _scratch(self, n: int):
        """n entries of each work array (works, pages, arm indexes), kept between calls
        (`Scratch`)."""
        return self._buf.get((np.float64, n), (self.pp.dtype, n), (np.uint32, n))

    def pop(self, j: int):
        """(works, pages, arm) of bucket j (nbuckets: past the window), in insertion
        order among the entries of one key (so of equal works); the bucket is left
        empty."""
        n = int(self.cnt[j])
        ow, op, oa = np.empty(n), np.empty(n, self.pp.dtype), np.empty(n, np.uint32)
        if n:
            _cal_pop(int(j), self.nb, self.bsz, *self._state(), ow, op, oa)
        return ow, op, oa

    def drain(self):
        """Every entry, bucket by bucket (the one past the window last)."""
        parts = [self.pop(j) for j in range(self.nb + 1) if self.cnt[j]]
        if not parts:
            return np.zeros(0), np.zeros(0, self.pp.dtype), np.zeros(0, np.uint32)
        return tuple(np.concatenate(x) for x in zip(*parts))

    def new_window(self, w: float) -> None:
        """A window [w, growth x w); the caller has handed out every bucket of the old
        one."""
        width = (self.growth - 1.0) * w
        scale = self.nb / width if width > 0 else 0.0
        if not 0.0 < scale < math.inf:
            scale = float(self.nb)  # a window of one unit of work at w = 0
        self.base, self.scale, self.cur = float(w), scale, -1
        # a bucket spans at most half the key of its least work (2^(e-4) for works in
        # [2^e, 2^(e+1))): then it meets at most two keys
        e = math.frexp(self.base)[1]
        self._tight = (self.base >= sys.float_info.min and math.isfinite(self.base)
                       and 2.0 / scale <= math.ldexp(1.0, e - 5))

    def roll(self, w: float):
        """`new_window(w)`, then the entries past the old window into the new one's
        buckets, in place; returns (works, pages, arm) of those at or before its
        current bucket."""
        self.new_window(w)
        n = int(self.cnt[self.nb])
        ow, op, oa = np.empty(n), np.empty(n, self.pp.dtype), np.empty(n, np.uint32)
        q = 0
        if n:
            if not self._tight:
                self._reserve(n)
            m = min(n, max(ROLL_PIECE, self.bsz))
            bw, bp, ba = self._scratch(m)
            q = _cal_rebucket(
                self.nb, self.base, self.scale, float(self.cur + 1), self.nb, self.bsz,
                *self._state(), bw, bp, ba, ow, op, oa)
        return ow[:q].copy(), op[:q].copy(), oa[:q].copy()
