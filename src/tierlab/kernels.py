"""Compiled kernels (numba) for the loops numpy cannot make fast enough (issue 18).

Each kernel returns exactly what the numpy expression it replaces returns, so results
are identical whichever runs:

- `argsort_stable(keys)`: `np.argsort(keys, kind="stable")` for float64 keys, as an
  LSD radix sort of (key, index) pairs, 11-bit digits, digits every key shares skipped.
  -0.0 sorts with +0.0 and every NaN last, in input order, as numpy's does. Measured on
  this machine (2 cores, no other load): 65,536 random works 0.6-0.9 ms against 5.9 ms
  for numpy's stable sort and 7.5 ms for its quicksort; this is the sort of the fault
  works of each NUMA scan step's batch (`monitors/hint_faults.py`), 45% of AutoNUMA's
  CPU on `benchmarks/bench_scale.py` (target 2 of issue 18: every policy under 60 s).
- `merge_sorted(w1, p1, a1, w2, p2, a2)`: the stable merge of two batches sorted by w
  (equal keys: the first batch's first), i.e. what concatenating them and sorting
  stably gives, in one pass instead of a sort and three gathers.

numba compiles each kernel at first use and caches the machine code beside this file
(`cache=True`), so only the first run on a machine pays the compile (a few seconds).
"""
from __future__ import annotations

import numpy as np

_jit = None


def _numba():
    global _jit
    if _jit is None:
        import numba
        _jit = numba.njit(cache=True, nogil=True)
    return _jit


_kernels = {}


def _kernel(name):
    k = _kernels.get(name)
    if k is None:
        k = _kernels[name] = _numba()(_PY[name])
    return k


# -- the Python sources numba compiles (valid Python, run as such by nothing else) ----
def _argsort_stable_py(keys):
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


def _merge_sorted_py(w1, p1, a1, w2, p2, a2):
    n1, n2 = w1.shape[0], w2.shape[0]
    w = np.empty(n1 + n2, w1.dtype)
    p = np.empty(n1 + n2, p1.dtype)
    a = np.empty(n1 + n2, a1.dtype)
    i = j = o = 0
    while i < n1 and j < n2:
        if w2[j] < w1[i]:
            w[o], p[o], a[o] = w2[j], p2[j], a2[j]
            j += 1
        else:
            w[o], p[o], a[o] = w1[i], p1[i], a1[i]
            i += 1
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


def _pages_on_py(node_map, node, start, limit, flags, mask, value, use_flags):
    npages = node_map.shape[0]
    out = np.empty(min(limit, npages) + 1, np.int64)  # +1: the branchless store
    chunk = max(4 * limit, 4096)
    n = 0
    pos = start % max(npages, 1)
    scanned = 0
    while n < limit and scanned < npages:
        end = min(pos + chunk, npages, pos + npages - scanned)
        i = pos
        if use_flags:
            while i < end and n < limit:
                out[n] = i
                n += (node_map[i] == node) & ((flags[i] & mask) == value)
                i += 1
        else:
            while i < end and n < limit:
                out[n] = i
                n += node_map[i] == node
                i += 1
        if n == limit:  # a hit later in the window ends it after the last page taken
            while i < end:
                if node_map[i] == node and (not use_flags or (flags[i] & mask) == value):
                    end = out[n - 1] + 1
                    break
                i += 1
        scanned += end - pos
        pos = end % npages
        chunk = min(2 * chunk, 1 << 22)
    return out[:n], pos, scanned


def _similar_pairs_py(h, valid, window, table):
    r = h.shape[0]
    out = np.ones(max(r - 1, 0), np.bool_)
    w = min(window, valid)
    one = np.uint64(1)
    for i in range(r - 1):
        a, b = h[i], h[i + 1]
        ca = cb = 0
        for k in range(w):  # the window of bits [0, w)
            ca += (a >> np.uint64(k)) & one
            cb += (b >> np.uint64(k)) & one
        k = 0
        while True:
            if not table[ca, cb]:
                out[i] = False
                break
            if k + w >= valid:
                break
            # slide to bits [k + 1, k + 1 + w)
            ca += ((a >> np.uint64(k + w)) & one) - ((a >> np.uint64(k)) & one)
            cb += ((b >> np.uint64(k + w)) & one) - ((b >> np.uint64(k)) & one)
            k += 1
    return out


_PY = {"argsort_stable": _argsort_stable_py, "merge_sorted": _merge_sorted_py,
       "pages_on": _pages_on_py, "similar_pairs": _similar_pairs_py}

#: below this size numpy's own sort is as fast and needs no compiled code
SMALL = 256


def argsort_stable(keys) -> np.ndarray:
    """`np.argsort(keys, kind="stable")` for a float64 array (radix sort)."""
    keys = np.ascontiguousarray(keys, dtype=np.float64)
    if keys.shape[0] <= SMALL:
        return np.argsort(keys, kind="stable")
    return _kernel("argsort_stable")(keys)


def pages_on(node_map, node, start, limit, flags=None, mask=0, value=0):
    """`Memory.pages_on`'s address scan (a CLOCK hand over one node's pages, the same
    chunks, so the same pages, hand and addresses scanned) in one pass that stops at the
    limit, where numpy compares, masks and collects each whole chunk."""
    use = flags is not None
    f = flags if use else node_map
    return _kernel("pages_on")(node_map, np.uint8(node), int(start), int(limit), f,
                               np.uint8(mask), np.uint8(value), use)


def similar_pairs(h, valid: int, window: int, table) -> np.ndarray:
    """IDT's merge test of neighbours i, i+1 (`IdtRegions._similar`): table[c_i, c_j]
    for the accessed-bit counts of every sliding window of `window` bits over the
    `valid` newest history bits (one window of `valid` bits if fewer), stopping at the
    first window that fails, where numpy counts every window of every region."""
    return _kernel("similar_pairs")(np.ascontiguousarray(h, dtype=np.uint64), int(valid),
                                    int(window), np.ascontiguousarray(table, dtype=np.bool_))


def merge_sorted(w1, p1, a1, w2, p2, a2):
    """Stable merge of two sorted batches (keys w, payloads p and a)."""
    if w1.shape[0] == 0 or w2.shape[0] == 0 or w1[-1] <= w2[0]:
        return (np.concatenate((w1, w2)), np.concatenate((p1, p2)),
                np.concatenate((a1, a2)))
    return _kernel("merge_sorted")(w1, p1, a1, w2, p2, a2)
