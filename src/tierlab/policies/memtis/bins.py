"""MEMTIS's per-page access histogram, compiled: counts cooled lazily (a count last
cooled at clock c is halved once per cooling since), the bin of a count (get_idx: its
bit length), a sample's count written with its bin moved, a huge page split into its
subpages' bins, and the huge-page cooling pass (hot subpages, halving, the kept
histogram) in one pass (webglider/memtis, linux/mm/htmm_core.c)."""
from __future__ import annotations

import numpy as np

from ...jit import bitlen, helper, kernel


@helper(inline=True)
def _cooled_bin(c, pc, clock, max_shift, nbins):
    # MEMTIS's bin of count c last cooled at clock pc: min(bit length of the lazily
    # cooled count + 1, nbins) (get_idx is that minus one)
    d = min(max(clock - np.int64(pc), 0), max_shift)
    return min(bitlen((np.int64(c) >> d) + 1), nbins)


@kernel
def _cooled_bins(cnt, pclk, clock, max_shift, nbins):
    out = np.zeros(nbins + 1, np.int64)
    for p in range(cnt.shape[0]):
        out[_cooled_bin(cnt[p], pclk[p], clock, max_shift, nbins)] += 1
    return out


def cooled_bins(cnt, pclk, clock: int, max_shift: int, nbins: int) -> np.ndarray:
    """Pages per bin min(bit_length((cnt >> clip(clock - pclk, 0, max_shift)) + 1),
    nbins) (index 0 unused): MEMTIS's histogram of every 4 KiB page by its lazily
    cooled count, in one pass without temporaries."""
    return _cooled_bins(cnt, pclk, np.int64(clock), np.int64(max_shift),
                        int(nbins))


@kernel
def _set_counts(cnt, pclk, pages, new, clock, max_shift, nbins, ebins, track):
    # cnt[pages] = new (distinct pages), each page moved between the kept bins of
    # `cooled_bins` (its pclk unchanged) when track
    for i in range(pages.shape[0]):
        p = pages[i]
        if track:
            eo = _cooled_bin(cnt[p], pclk[p], clock, max_shift, nbins)
            cnt[p] = new[i]
            en = _cooled_bin(cnt[p], pclk[p], clock, max_shift, nbins)
            if eo != en:
                ebins[eo] -= 1
                ebins[en] += 1
        else:
            cnt[p] = new[i]


def set_counts(cnt, pclk, pages, new, clock: int, max_shift: int, nbins: int,
               ebins) -> None:
    """`cnt[pages] = new` (pages distinct) with `ebins`, the kept `cooled_bins` of
    every page (None: not kept), moved for each page whose bin changes: one pass where
    MEMTIS's sample path took `cooled_bins` of the pages before and after the write."""
    track = ebins is not None
    if not track:
        ebins = np.zeros(nbins + 1, np.int64)
    _set_counts(cnt, pclk, np.asarray(pages, dtype=np.int64),
                np.asarray(new, dtype=np.int64), np.int64(clock),
                np.int64(max_shift), np.int64(nbins), ebins, track)


@kernel
def _split_bins(cnt, pclk, node, sp, hp, npages, unalloc, clock, max_shift, nbins):
    # MEMTIS's get_idx histogram (min(bit length of the lazily cooled count + 1,
    # nbins) - 1) of the allocated base pages of split huge pages sp
    out = np.zeros(nbins, np.int64)
    for i in range(sp.shape[0]):
        base = sp[i] * hp
        for p in range(base, min(base + hp, npages)):
            if node[p] == unalloc:
                continue
            out[_cooled_bin(cnt[p], pclk[p], clock, max_shift, nbins) - 1] += 1
    return out


def split_bins(cnt, pclk, node, sp, hp: int, unalloc: int, clock: int, max_shift: int,
               nbins: int) -> np.ndarray:
    """MEMTIS's histogram of the allocated base pages of split huge pages `sp` by
    get_idx of their lazily cooled counts, in one pass (its numpy form listed the
    pages a chunk at a time, then gathered, halved and binned them)."""
    return _split_bins(cnt, pclk, node, np.asarray(sp, dtype=np.int64),
                       np.int64(hp), np.int64(node.shape[0]), np.uint8(unalloc),
                       np.int64(clock), np.int64(max_shift), np.int64(nbins))


@kernel
def _memtis_cool(hs, d, hp, cnt, pclk, may_hot, ebins, track, hot_thr, bp_active,
                 clock, max_shift, nbins, force, hot_utils, refs, sq, done):
    # each huge page's subpage counts read once for their sum of squares, which is
    # exact here (so numpy's pairwise float sum gives it too) when every count is below
    # 2^26 and the sum below 2^53; a row where it is not is left untouched (done false)
    # unless force, for the caller to sum as numpy does first
    n = hs.shape[0]
    big = np.int64(1) << np.int64(26)
    lim = np.int64(1) << np.int64(53)
    for i in range(n):
        base = hs[i] * hp
        s = d[i]
        isum = np.int64(0)
        ok = True
        for j in range(hp):
            v = np.int64(cnt[base + j])
            if v >= big:
                ok = False
            else:
                isum += v * v
        ok = ok and isum < lim
        done[i] = ok or force
        if not done[i]:
            continue
        sq[i] = np.float64(isum)
        hu = 0
        rf = np.int64(0)
        zhot = 0 >= hot_thr  # a zero count: get_idx 0, bin 1 before and after
        zmay = 0 >= bp_active
        for j in range(hp):
            p = base + j
            v = np.int64(cnt[p])
            if v == 0:  # (most subpages)
                if zhot:
                    hu += 1
                may_hot[p] = zmay
                pclk[p] = clock
                continue
            new = v >> s
            # bins as in `cooled_bins`: of v + 1 (get_idx is that minus one), of the
            # lazily cooled count + 1, and of new + 1
            ex = min(bitlen(v + 1), nbins)
            ey = _cooled_bin(v, pclk[p], clock, max_shift, nbins)
            ez = min(bitlen(new + 1), nbins)
            if ex - 1 >= hot_thr:
                hu += 1
                rf += v
            may_hot[p] = ex - 1 >= bp_active
            if track and ey != ez:  # (most subpages: a zero count stays in bin 1)
                ebins[ey] -= 1
                ebins[ez] += 1
            cnt[p] = new
            pclk[p] = clock
        hot_utils[i] = hu
        refs[i] = rf


def memtis_cool(hs, d, hp: int, cnt, pclk, may_hot, ebins, hot_thr: int,
                bp_active: int, clock: int, max_shift: int, nbins: int):
    """MEMTIS's `check_transhuge_cooling` over the subpages of huge pages `hs` (d: each
    one's shift) in one pass: returns (hot_utils, refs, sq) per huge page (subpages
    with get_idx >= hot_thr, their count sum, and the sum of the squared counts before
    cooling, as numpy's float sum gives it), sets may_hot (get_idx >= bp_active),
    halves cnt by d, sets pclk to clock and, with `ebins` (else None), moves each
    subpage between the kept bins of `cooled_bins`. The numpy passes it replaced: the
    gather of every subpage's count, the squares' float sum, get_idx by frexp, the row
    sums, the scatters and two `cooled_bins` calls. The squares' sum is the exact
    integer one where that is below 2^53 (then every order of float additions gives
    it); numpy's own for the other rows."""
    track = ebins is not None
    if not track:
        ebins = np.zeros(nbins + 1, np.int64)
    hs = np.asarray(hs, dtype=np.int64)
    d = np.asarray(d, dtype=np.int64)
    n = hs.shape[0]
    hot_utils, refs = np.zeros(n, np.int64), np.zeros(n, np.int64)
    sq, done = np.zeros(n), np.empty(n, np.bool_)
    k = _memtis_cool
    args = (np.int64(hp), cnt, pclk, may_hot, ebins, track, np.int64(hot_thr),
            np.int64(bp_active), np.int64(clock), np.int64(max_shift), np.int64(nbins))
    k(hs, d, *args, False, hot_utils, refs, sq, done)
    if not done.all():
        r = np.flatnonzero(~done)
        c = cnt[hs[r, None] * hp + np.arange(hp)].astype(np.int64)
        sq[r] = (c.astype(float) ** 2).sum(axis=1)
        hu, rf, dq, dn = np.zeros(r.size, np.int64), np.zeros(r.size, np.int64), \
            np.zeros(r.size), np.empty(r.size, np.bool_)
        k(hs[r], d[r], *args, True, hu, rf, dq, dn)
        hot_utils[r], refs[r] = hu, rf
    return hot_utils, refs, sq
