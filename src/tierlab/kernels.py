"""Compiled kernels (numba) for the loops numpy cannot make fast enough (issue 18).

Each returns exactly what the numpy code it replaced returned (tests/test_kernels.py
checks each against that code or numpy), so run records are identical whichever runs.
The targets they serve are issue 18's: bench_scale (every policy under 60 s) and
bench_memsim (every policy within 10 s and 2 GiB); docs/benchmarks.md has the figures.

- `argsort_stable`, `merge_sorted`: the hint faults' batches sorted by fault work (an
  LSD radix sort of (key, index) pairs; 65,536 works in 0.6-0.9 ms against numpy's
  5.9 ms) and merged in one pass: 45% of AutoNUMA's CPU was numpy's argsort.
- `FaultCalendar` (`cal_push`, `cal_pop`, `cal_rebucket`): the hint faults scheduled
  past the current bucket of fault work wait unsorted in a calendar queue, so only the
  faults a run reaches are sorted (tpp at 10x bench_memsim: 66 -> 35-40 s).
- `scan_arm`, `lru_mark`: a NUMA scan step's range armed, and a hint fault's LRU marks
  with their activations (TPP, NOMAD), one pass each where numpy made several.
- `poll_faults`: a hint-fault poll's times (W^-1), order and latencies in one pass,
  ordering by merging the batches' sorted runs instead of a radix sort (autonuma at 100
  simulated s of bench_scale: 22.9-24.9 -> 18.2-20.8 s).
- `NodeBits`: the page map as one bitmap per node, so kswapd's CLOCK hands read 64
  addresses per word and stop only at the node's pages (`Memory.pages_on`); a word's
  next page is LLVM's count-trailing-zeros (`_llvm_cttz`), and a page's pass-time
  interval is looked up only when the page leaves the previous one (with `set_active`
  below, multi-clock at bench_scale 65.8 -> 54.2 s).
- `sub_expected`, `draw_below`, `table_min`: the rate model's expected accesses of
  single pages whose clear times are few values (kswapd's pass times, Nimble's check
  times, one time for DAMON's and IDT's samples), `AccessedBits.test_since_table`,
  summed negated and compared with the draws in one pass each (nimble at bench_memsim
  11.8 -> 9.2 s with the row kept between pages in `sub_expected`); `draw_below`
  takes expm1 once per run of equal values (idt at bench_scale spent 11 ns a page
  in numpy's expm1, on values that change at 0.016% of its pages).
- `LruLists`, `nimble_inactive`, `nimble_active`: Nimble's lists as a counting sort by
  insertion index and its aging pass in place.
- `similar_pairs`: IDT's Fisher merge test of neighbours over their ring buffers of
  history bits, stopping at the first window that fails.
- `unique_in_order`: the engine's move requests without repeats (a bitset pass).
- `range_movable`, `relocate_ranges`, `fill_ranges`: whole regions moved, and a value
  written over them, without listing their pages first (IDT at 10x bench_memsim:
  29.9 -> 17.5 s).
- `sub_expected_eps`: `sub_expected` over every field epoch of a lookup in one pass.
- `draw_pairs`, `sample_account`, `slow_hits`: IDT's sampled pages per region, their
  accessed bits counted and written to the history, and the regions seen off the top
  node (pages charged to the decisions that demoted them), one pass each per sampling
  interval.
- `bisect_throughput`: the closed loop's bisection, run at every engine step.
- `range_node_counts`, `pages_not_on`: counts and pages of address ranges read from the
  page map without expanding them into address arrays (the oracle on the redis trace:
  102 -> 15 s).
- `move_pages`, `relocate_sums`, `set_active`: the engine's bookkeeping of every
  migration (page map, node bitmaps, per-node and per-block counts, the moved pages'
  rates by node, promotions and ping-pongs) and the LRU's activation, one pass each
  where numpy made ten: 58 M pages moved and 67 M (de)activated in multi-clock's first
  100 s of bench_scale.
- `pages_by_byte`: AutoTiering's LAP list (a node's pages by access-history level), a
  counting sort over the blocks holding the node's pages, into a reused buffer
  (bench_memsim's autotiering: 12.6 -> about 8.5 s).
- `spend_budgets`: one epoch of the lazy first-access search of the `HintFaults`
  primitive (Tiering-0.8's and AutoTiering's scanner), where numpy made four passes.
- `halve_at`, `tier_shares` (`TierShares`): HeMem's lazy cooling of the pages it looks
  at, and Colloid-on-HeMem's shares of every tracked page, one pass each (bench_memsim's
  colloid-hemem: 10.8 -> about 5.5 s); the shares' orders by a counting sort over the
  integer counts, kept to the sources of positive count and the partners
  (bench_scale's colloid-hemem: 77.5 -> 50.8 s).
- `pick_pairs`: Colloid's pairs of pages to swap, each round one walk of the sources by
  share with a forward pointer over the partners, where numpy searched every source
  per pair (half of colloid-hemem's CPU at bench_scale).
- `sorted_find`: an AccessedBits level's lookup of sorted pages in a sorted run, one
  galloping walk (damon-tiering at bench_scale, with its charged part read only as far
  as needed: 71.9 -> 53.4 s).
- `cooled_bins`, `memtis_cool`: MEMTIS's per-page histogram of lazily cooled counts, and
  its huge-page cooling (get_idx, hot subpages, halving, the kept histogram) in one
  pass: bench_memsim's memtis at 10x the updates, 22.1 -> 19.1 s. The bins by LLVM's
  count-leading-zeros (`_llvm_bitlen`), the subpages' squared counts summed in the same
  pass where that sum is exact, and a sample's count written with its bin moved
  (`set_counts`), `split_bins`: with `unique_counts` and `unique_event_counts`
  (numpy's sort, then the runs counted in one pass) and the PEBS kernels below,
  bench_scale's memtis 103.6 -> 55.1 s.
- `argsort_untied`: numpy's stable argsort of keys that rarely tie (PEBS sample times,
  fault works) by its SIMD quicksort, the stable sort only where keys tie; `by_time`:
  PEBS samples in time order from their works' sort and one walk over the timeline's
  breakpoints.
- `draw_accessed`, `lru_sweep`: accessed-bit draws drawing numpy's PCG64 stream in the
  kernel; and kswapd's sweep of one list (the hand, the draws and the list changes)
  in one pass, by blocks that stay in the cache.

numba compiles each kernel at first use and caches the machine code beside this file
(`cache=True`), so only the first run on a machine pays the compile (about a second a
kernel). Without numba (the QEMU guest's trimmed Python, which runs only the Linux
backend) a kernel falls back to its numpy form where one exists (`_NUMPY`), else to its
Python source.
"""
from __future__ import annotations

import math
import sys

import numpy as np

from .jit import Kernel, bitlen, cttz, f2u, helper, mulhi, u2f
from .jit import numba_jit as _numba


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


@helper(inline=True)
def _time_at(w, i, ta, wa):
    # Timeline.time_at_work of work w, i its searchsorted(wa, w, "left") (numpy's
    # arithmetic: the segment's fraction clipped to [0, 1], ta[0] at or below wa[0])
    nb = wa.shape[0]
    i = min(max(i, 1), nb - 1)
    w0, w1 = wa[i - 1], wa[i]
    f = 0.0
    if w1 > w0:
        f = min(max((w - w0) / (w1 - w0), 0.0), 1.0)
    t = ta[i - 1] + f * (ta[i] - ta[i - 1])
    if w <= wa[0]:
        t = ta[0]
    return t


@helper(inline=True)
def _cooled_bin(c, pc, clock, max_shift, nbins):
    # MEMTIS's bin of count c last cooled at clock pc: min(bit length of the lazily
    # cooled count + 1, nbins) (get_idx is that minus one)
    d = min(max(clock - np.int64(pc), 0), max_shift)
    return min(bitlen((np.int64(c) >> d) + 1), nbins)





@helper(inline=True)
def _pcg_step(hi, lo, ahi, alo, chi, clo):
    # the 128-bit LCG state (hi, lo) times (ahi, alo) plus (chi, clo), modulo 2^128
    nlo = lo * alo
    nhi = mulhi(lo, alo) + lo * ahi + hi * alo
    slo = nlo + clo
    return nhi + chi + (np.uint64(1) if slo < nlo else np.uint64(0)), slo


@helper(inline=True)
def _pcg_double(hi, lo):
    # PCG64's XSL-RR output of state (hi, lo), its top 53 bits as a double in [0, 1)
    # (numpy's `random()`)
    x = hi ^ lo
    r = hi >> np.uint64(58)
    v = (x >> r) | (x << ((np.uint64(64) - r) & np.uint64(63)))
    return np.float64(v >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@helper
def _pcg64_fill(st, jump, u, m):
    # u[:m] = the next m doubles of numpy's PCG64 `random()` from state st (high,
    # low; advanced). jump[k] = (A, C) of k + 1 steps (A = mult^(k+1), C = inc (1 +
    # mult + ... + mult^k), each as high, low): four states are taken from one, so
    # four multiplies run side by side instead of one after another
    hi, lo = st[0], st[1]
    i = 0
    while i + 4 <= m:
        for k in range(4):
            nh, nl = _pcg_step(hi, lo, jump[k, 0], jump[k, 1], jump[k, 2], jump[k, 3])
            u[i + k] = _pcg_double(nh, nl)
        hi, lo = nh, nl
        i += 4
    while i < m:
        hi, lo = _pcg_step(hi, lo, jump[0, 0], jump[0, 1], jump[0, 2], jump[0, 3])
        u[i] = _pcg_double(hi, lo)
        i += 1
    st[0] = hi
    st[1] = lo


@helper
def _pcg_advance(hi, lo, q, jump):
    # the state (hi, lo) q steps on (jump[0]: one step's A, C): Brown's jump-ahead,
    # O(log q) 128-bit multiplies (numpy's PCG64 `advance`)
    z = np.uint64(0)
    ah, al, ch, cl = z, np.uint64(1), z, z  # the steps so far: A = 1, C = 0
    mh, ml, ph, pl = jump[0, 0], jump[0, 1], jump[0, 2], jump[0, 3]
    while q > 0:
        if q & 1:
            ah, al = _pcg_step(ah, al, mh, ml, z, z)
            ch, cl = _pcg_step(ch, cl, mh, ml, ph, pl)
        m1 = ml + np.uint64(1)  # (A + 1), for C of twice the steps: C (A + 1)
        ph, pl = _pcg_step(ph, pl, mh + (np.uint64(1) if m1 == z else z), m1, z, z)
        mh, ml = _pcg_step(mh, ml, mh, ml, z, z)
        q >>= 1
    return _pcg_step(hi, lo, ah, al, ch, cl)


_pcg_advance = _pcg_advance


def _poll_faults_py(pages, works, arm, arm_t, ta, wa, lo, now, flag):
    # Timeline.time_at_work of each work (searching from breakpoint lo when the work is
    # above it, which finds the same segment; from the previous work's breakpoint,
    # walking up, when the works ascend: a poll's works are a few ascending runs, and
    # a bisection's branches mispredict), at least its arm time, at most now
    n = works.shape[0]
    nb = wa.shape[0]
    times = np.empty(n)
    i = 0
    for q in range(n):
        w = works[q]
        if q > 0 and w >= works[q - 1]:
            while i < nb and wa[i] < w:
                i += 1
        elif nb >= 2 and w > wa[lo]:
            i = _lower(wa, w, lo, nb)
        else:
            i = _lower(wa, w, 0, nb)
        t = _time_at(w, i, ta, wa)
        a = arm_t[arm[q]]
        if a > t:
            t = a
        if t > now:
            t = now
        if t != t:
            return pages.astype(np.int64)[:0], times[:0], times[:0], False
        times[q] = t
    order = _runs_order(times)
    p_out = np.empty(n, np.int64)
    t_out = np.empty(n)
    l_out = np.empty(n)
    one = np.uint64(1)
    for j in range(n):
        q = order[j]
        p = pages[q]
        p_out[j] = p
        t_out[j] = times[q]
        l_out[j] = max(times[q] - arm_t[arm[q]], 0.0)
        flag[p >> 6] &= ~(one << np.uint64(p & 63))
    return p_out, t_out, l_out, True


def _argsort_bucket_py(keys, order, out):
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
    # branch-free selects: random keys mispredict a branch half the time (14.6 -> 11.2
    # ns an entry at 2^20 + 2^20, most of the rest being the new arrays' page faults)
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




def _cal_push_py(budget, r, w0, pages, arm, base, scale, lim, nb, bsz, pwl, pwm, pp, pa,
                 bhi, bfill, opn, nxt, head, tail, cnt, free, nfree, near_w, near_p, near_a):
    # fault work w0 + budget / r of each entry (numpy's order of operations), placed
    return _cal_place(budget, pages, arm, budget.shape[0], budget, r, w0, True, base, scale,
                      lim, nb, bsz, pwl, pwm, pp, pa, bhi, bfill, opn, nxt, head, tail, cnt,
                      free, nfree, near_w, near_p, near_a, 0)


def _cal_rebucket_py(src, base, scale, lim, nb, bsz, pwl, pwm, pp, pa, bhi, bfill, opn, nxt,
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


def _scan_arm_py(node, start, end, skip, flag, unalloc, out):
    # a NUMA scan step over pages [start, end): the allocated ones (PTEs walked)
    # counted; those on a node not skipped and not armed yet (their bit in the bitmap
    # `flag` clear) flagged armed and listed in out, in address order; returns
    # (walked, listed)
    walked = 0
    k = 0
    one = np.uint64(1)
    for p in range(start, end):
        v = node[p]
        if v != unalloc:
            walked += 1
        b = one << np.uint64(p & 63)
        if not skip[v] and not flag[p >> 6] & b:
            flag[p >> 6] |= b
            out[k] = p
            k += 1
    return walked, k


def _lru_mark_py(flags, pages, active, referenced, tmp, act, done, node_map, nr_active,
                 row, use_row):
    # act[i]: pages[i] active; the inactive ones marked accessed: the referenced ones
    # activated as `_set_active` activates them after the marks (those allocated: ACTIVE
    # set, REFERENCED cleared, their node's count +1 and their bit in row), the others
    # made referenced. A page activated here carries `tmp` until the end, so that a
    # later listing of it reads as inactive and counts again, as it did when the
    # activations came after the loop (`set_active` counts a page listed twice twice)
    one = np.uint64(1)
    k = 0
    for i in range(pages.shape[0]):
        p = pages[i]
        f = flags[p]
        if (f & active) and not (f & tmp):
            act[i] = True
            continue
        act[i] = False
        if f & tmp:
            nr_active[node_map[p]] += 1
        elif f & referenced:
            d = node_map[p]
            if d != 255:
                flags[p] = (f | active | tmp) & ~referenced
                nr_active[d] += 1
                if use_row:
                    row[p >> 6] |= one << np.uint64(p & 63)
                done[k] = p
                k += 1
        else:
            flags[p] = f | referenced
    for j in range(k):
        flags[done[j]] &= ~tmp


def _cal_pop_py(j, nb, bsz, pwl, pwm, pp, pa, bhi, bfill, opn, nxt, head, tail, cnt, free,
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


def _similar_pairs_py(h, newest, valid, window, nbits, table):
    # h: (R, words) ring buffers of nbits bits; the k-th newest bit sits at position
    # (newest - k) mod nbits (word p >> 6, bit p & 63); windows slide from the newest.
    # Two identical buffers have equal counts in every window: similar whenever the
    # table's diagonal is (always for Fisher's test and the public rule). Each buffer
    # is copied once into a small row (x, then y) read many times
    r = h.shape[0]
    words = h.shape[1]
    out = np.ones(max(r - 1, 0), np.bool_)
    if r < 2:
        return out
    w = min(window, valid)
    diag = True
    for a in range(w + 1):
        diag = diag and table[a, a]
    one = np.uint64(1)
    x = np.empty(words, np.uint64)
    y = np.empty(words, np.uint64)
    for q in range(words):
        y[q] = h[0, q]
    for i in range(r - 1):
        x, y = y, x
        same = True
        for q in range(words):
            y[q] = h[i + 1, q]
            same = same and y[q] == x[q]
        if same and diag:
            continue
        ca = 0
        cb = 0
        p = newest
        for k in range(w):  # the window of the w newest bits
            ca += np.int64((x[p >> 6] >> np.uint64(p & 63)) & one)
            cb += np.int64((y[p >> 6] >> np.uint64(p & 63)) & one)
            p = p - 1 if p > 0 else nbits - 1
        pin, pout = p, newest  # the bits entering and leaving at the next slide
        k = 0
        while True:
            if not table[ca, cb]:
                out[i] = False
                break
            if k + w >= valid:
                break
            ca += np.int64((x[pin >> 6] >> np.uint64(pin & 63)) & one)
            ca -= np.int64((x[pout >> 6] >> np.uint64(pout & 63)) & one)
            cb += np.int64((y[pin >> 6] >> np.uint64(pin & 63)) & one)
            cb -= np.int64((y[pout >> 6] >> np.uint64(pout & 63)) & one)
            pin = pin - 1 if pin > 0 else nbits - 1
            pout = pout - 1 if pout > 0 else nbits - 1
            k += 1
    return out


def _sample_account_py(a, b, count, h, word, bit, push):
    # IdtRegions.on_sample: acc = a | b per region, count += acc and, with push, acc
    # written as bit `bit` of word `word` of each ring buffer (h: (R, words) uint64);
    # returns acc
    r = a.shape[0]
    acc = np.empty(r, np.bool_)
    one = np.uint64(1)
    sh = np.uint64(bit)
    keep = ~(one << sh)
    for i in range(r):
        x = a[i] or b[i]
        acc[i] = x
        if x:
            count[i] += 1
        if push:
            h[i, word] = (h[i, word] & keep) | (np.uint64(x) << sh)
    return acc


def _sample_account_numpy(a, b, count, h, word, bit, push):
    acc = a | b
    count += acc
    if push:
        col = h[:, word] & ~np.uint64(1 << bit)
        h[:, word] = col | (acc.astype(np.uint64) << np.uint64(bit))
    return acc


@helper
def _sub_expected(lam, pages, which, by_page, w_tab, starts, rate, ends, w_a, use_max,
                     whi, init):
    ns = starts.shape[0]
    lo = 0  # searchsorted(starts, p, "right"), kept while p stays in its row
    for i in range(pages.shape[0]):
        p = pages[i]
        lo = _upper_near(starts, p, lo, 0, ns)
        r = rate[lo] * (1.0 if p < ends[lo] else 0.0)
        w0 = w_tab[which[p] if by_page else which[i]]
        wlo = max(w0, w_a) if use_max else w0
        lam[i] = (0.0 if init else lam[i]) - r * max(whi - wlo, 0.0)


@helper
def _sub_expected_eps(lam, pages, which, by_page, w_tab, starts, soff, rate, ends, w_a,
                        use_max, whi):
    # sub_expected over every epoch k (tables concatenated: starts[soff[k]:soff[k+1]],
    # rate and ends rows from soff[k] + k, each table with its sentinel row first), the
    # epochs summed in order per page: the same operations as one pass per epoch
    ne = soff.shape[0] - 1
    # per epoch, searchsorted "right" in its table, kept while the pages stay in its row
    lo = soff[:-1].copy()
    for i in range(pages.shape[0]):
        p = pages[i]
        w0 = w_tab[which[p] if by_page else which[i]]
        acc = 0.0
        for k in range(ne):
            a, e = soff[k], soff[k + 1]
            q = lo[k] = _upper_near(starts, p, lo[k], a, e)
            j = q + k  # the row of table k
            r = rate[j] * (1.0 if p < ends[j] else 0.0)
            wlo = max(w0, w_a[k]) if use_max[k] else w0
            acc = acc - r * max(whi[k] - wlo, 0.0)
        lam[i] = acc


def _draw_below_py(u, lam, out):
    # out[i] = u[i] < c, c = -expm1(lam[i]) = 1 - exp(-m), m = -lam[i] the expected
    # accesses, with libm's expm1 once per run of equal values; stops where
    # the values have changed at more than 1/16 of the pages so far (past the first
    # 256), where numpy's loop over expm1 is the faster, and returns that index (n
    # when done)
    n = u.shape[0]
    i = 0
    runs = 0
    while i < n:
        if runs * 16 > i and i >= 256:
            return i
        x = lam[i]
        j = i + 1
        while j < n and lam[j] == x:
            j += 1
        c = -math.expm1(x)
        for k in range(i, j):
            out[k] = u[k] < c
        runs += 1
        i = j
    return n





@helper
def _draw_block(lam, u, m, st, jump, out, s, prev, c):
    # out[s + i] = u_i < c for the m values lam[:m], u_i the next doubles of the
    # PCG64 stream st (`_pcg64_fill`, into u) and c = -expm1(lam[i]) taken once per
    # run of equal values (prev: the value c belongs to); returns (prev, c)
    _pcg64_fill(st, jump, u, m)
    for i in range(m):
        x = lam[i]
        if x != prev:
            c = -math.expm1(x)
            prev = x
        out[s + i] = u[i] < c
    return prev, c




@helper
def _draw_pages(lam, u, pages, which, by_page, w_tab, starts, soff, rate, ends, w_a,
                   use_max, whi, multi, st, jump, out, s, prev, c):
    # out[s + i] for the m = len(pages) pages (m <= len(lam)): their expected accesses
    # into lam (`_sub_expected` of one epoch, with w_a, use_max and whi its first
    # entries; given multi, `_sub_expected_eps` of several, tables concatenated at
    # soff), drawn by `_draw_block`; returns its (prev, c)
    m = pages.shape[0]
    if multi:
        _sub_expected_eps(lam[:m], pages, which, by_page, w_tab, starts, soff, rate, ends,
                          w_a, use_max, whi)
    else:
        _sub_expected(lam[:m], pages, which, by_page, w_tab, starts, rate, ends, w_a[0],
                      use_max[0], whi[0], True)
    return _draw_block(lam, u, m, st, jump, out, s, prev, c)




def _draw_accessed_py(out, pages, which, by_page, w_tab, starts, soff, rate, ends, w_a,
                      use_max, whi, multi, st, jump, lam, u):
    # RateSource.accessed_table's chunks in one pass: `_draw_pages` by blocks of lam's
    # size
    n = pages.shape[0]
    b = lam.shape[0]
    prev, c = np.nan, 0.0
    for s in range(0, n, b):
        m = min(b, n - s)
        prev, c = _draw_pages(lam, u, pages[s:s + m], which if by_page else which[s:s + m],
                              by_page, w_tab, starts, soff, rate, ends, w_a, use_max, whi,
                              multi, st, jump, out, s, prev, c)


def _sorted_find_py(keys, q, pos, hit):
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


def _sorted_find_numpy(keys, q, pos, hit):
    pos[:] = np.searchsorted(keys, q)
    ok = pos < keys.shape[0]
    hit[:] = False
    hit[ok] = keys[pos[ok]] == q[ok]


def _list_hist_py(node_map, node, blocks, block, flags, mask, inserted, ntimes, nruns):
    # (nruns[0]: the runs counted, address-order stretches of the node's pages of one
    # list and index)
    n = node_map.shape[0]
    hist = np.zeros((2, ntimes), np.int64)
    flat = hist.reshape(2 * ntimes)
    # a run of pages of one list and index is counted in a register, added at its end:
    # an increment in memory per page waits on the one before (store to load)
    cur, run = 0, 0
    for b in range(blocks.shape[0]):
        nb = blocks[b]
        if nb == 0:
            continue
        lo, hi = b * block, min((b + 1) * block, n)
        full = nb == hi - lo  # every page of the block is the node's
        for p in range(lo, hi):
            if full or node_map[p] == node:
                key = (ntimes if (flags[p] & mask) != 0 else 0) + inserted[p]
                if key == cur:
                    run += 1
                else:
                    flat[cur] += run
                    nruns[0] += 1 if run else 0
                    cur, run = key, 1
    flat[cur] += run
    nruns[0] += 1 if run else 0
    return hist


@helper
def _list_bounds(hist, take, pos, end):
    # per list k and index u (at k * ntimes + u): where its next page goes in the
    # list's output (pos) and where its part ends (end): all its pages below the index
    # reached by the list's first take[k] pages, the first ones in address order at
    # that index, none above; returns take's sum
    ntimes = hist.shape[1]
    left = 0
    for k in range(2):
        m = take[k]
        left += m
        s = 0
        for u in range(ntimes):
            if s >= m:
                break
            pos[k * ntimes + u] = s
            s = min(s + hist[k, u], m)
            end[k * ntimes + u] = s
    return left




@helper(inline=True)
def _inactive_rule(f, ref, active, referenced):
    # shrink_inactive_page_list on a page of flags f, referenced (ref) or not: two
    # touches activate (returns the new flags and whether it was activated)
    if ref:
        act = (f & referenced) != 0
        return (f | referenced | (active if act else 0)), act
    return f & ~referenced, False




@helper
def _nimble_flush(buf, m, lam, u, ref, checked, w_tab, starts, soff, rate, ends, w_a,
                     use_max, whi, multi, rs, jump, prev, c, flags, inserted, t, mask,
                     referenced, up, nup):
    # `_list_emit`'s m buffered pages of one index: their bits drawn from its
    # stream state rs (`_draw_pages`, as `_draw_accessed` draws them), then
    # `nimble_inactive`'s rule; returns (prev, c, pages activated so far)
    prev, c = _draw_pages(lam, u, buf[:m], checked, True, w_tab, starts, soff, rate, ends,
                          w_a, use_max, whi, multi, rs, jump, ref, 0, prev, c)
    for i in range(m):
        p = buf[i]
        f, act = _inactive_rule(flags[p], ref[i], mask, referenced)
        if act:
            up[nup] = p
            nup += 1
        flags[p] = f
        inserted[p] = t
        checked[p] = t
    return prev, c, nup




def _list_emit_py(node_map, node, blocks, block, flags, mask, inserted, hist, take, out0,
                  out1, track, use_track, mins, draw, referenced, checked, up, t, w_tab,
                  starts, soff, rate, ends, w_a, use_max, whi, multi, st, jump, bh, bl, buf,
                  lam, u, ref):
    # the first take[k] pages of list k (list order: insertion index, then address)
    # into out0[:take[0]] and out1[:take[1]], with min(track) of each list's in mins
    # if use_track; or, with `draw`, Nimble's aging of list 0's (`Nimble._age`: the
    # accessed bits of `AccessedBits.test_since_table` and `nimble_inactive`) in the
    # same pass instead of listing them: each page's bit drawn as `_draw_accessed`
    # draws it at its place in the list (an index's pages draw on from the stream
    # state where its part of the list starts, kept in bh, bl), in blocks of pages of
    # one index up to buf's size (`_nimble_flush`), then the rule applied, the
    # activated pages into up in address order, and st left take[0] steps on. Returns
    # how many were activated, -1 where the node has fewer pages than hist promised.
    n = node_map.shape[0]
    ntimes = hist.shape[1]
    pos = np.zeros(2 * ntimes, np.int64)
    end = np.zeros(2 * ntimes, np.int64)
    left = _list_bounds(hist, take, pos, end)
    if draw:
        for v in range(ntimes):
            if end[v] > pos[v]:
                bh[v], bl[v] = _pcg_advance(st[0], st[1], pos[v], jump)
        st[0], st[1] = _pcg_advance(st[0], st[1], take[0], jump)
    if left == 0:
        return 0
    rs = np.empty(2, np.uint64)
    # the current run's list and index (cur), place (q) and end (e) in registers,
    # written back when the run ends (a place kept in memory per page waits on the
    # store before it); as mn0, mn1 for mins; the pages buffered (m) are of one
    # index (bk), drawn from its stream state (rs) before a page of another index is
    # buffered
    cur = 0
    q, e = pos[0], end[0]
    mn0, mn1 = mins[0], mins[1]
    bk = 0
    rs[0], rs[1] = bh[0], bl[0]
    prev, c = np.nan, 0.0
    nup, m = 0, 0
    for b in range(blocks.shape[0]):
        nb = blocks[b]
        if nb == 0:
            continue
        a0, a1 = b * block, min((b + 1) * block, n)
        full = nb == a1 - a0
        for p in range(a0, a1):
            if full or node_map[p] == node:
                key = (ntimes if (flags[p] & mask) != 0 else 0) + inserted[p]
                if key != cur:
                    pos[cur] = q
                    cur = key
                    q, e = pos[key], end[key]
                if q < e:
                    if key >= ntimes:
                        out1[q] = p
                        if use_track and track[p] < mn1:
                            mn1 = track[p]
                    elif not draw:
                        out0[q] = p
                        if use_track and track[p] < mn0:
                            mn0 = track[p]
                    else:
                        if key != bk:
                            if m:
                                prev, c, nup = _nimble_flush(
                                    buf, m, lam, u, ref, checked, w_tab, starts, soff,
                                    rate, ends, w_a, use_max, whi, multi, rs, jump, prev, c,
                                    flags, inserted, t, mask, referenced, up, nup)
                                m = 0
                            bh[bk], bl[bk] = rs[0], rs[1]
                            bk = key
                            rs[0], rs[1] = bh[bk], bl[bk]
                        buf[m] = p
                        m += 1
                        if m == buf.shape[0]:
                            prev, c, nup = _nimble_flush(
                                buf, m, lam, u, ref, checked, w_tab, starts, soff, rate,
                                ends, w_a, use_max, whi, multi, rs, jump, prev, c, flags,
                                inserted, t, mask, referenced, up, nup)
                            m = 0
                    q += 1
                    left -= 1
        if left == 0:
            break
    if m:
        prev, c, nup = _nimble_flush(buf, m, lam, u, ref, checked, w_tab, starts, soff,
                                     rate, ends, w_a, use_max, whi, multi, rs, jump, prev,
                                     c, flags, inserted, t, mask, referenced, up, nup)
    mins[0], mins[1] = mn0, mn1
    return nup if left == 0 else -1  # -1: fewer pages than the counts promised


def _first_seen_py(pages, seen):
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


def _first_seen_numpy(pages, seen):
    _, first = np.unique(pages, return_index=True)
    keep = np.zeros(pages.shape[0], np.bool_)
    keep[first] = True
    return keep, pages.shape[0] - first.shape[0]


def _table_min_py(pages, which, by_page, tab):
    m = np.inf
    for i in range(pages.shape[0]):
        x = tab[which[pages[i]] if by_page else which[i]]
        if x < m:
            m = x
    return m


def _nimble_inactive_py(scan, ref, flags, inserted, checked, now, active, referenced):
    up = np.zeros(scan.shape[0], np.bool_)
    for i in range(scan.shape[0]):
        p = scan[i]
        flags[p], up[i] = _inactive_rule(flags[p], ref[i], active, referenced)
        inserted[p] = now
        checked[p] = now
    return up


def _nimble_active_py(dscan, flags, inserted, checked, now, clear):
    for i in range(dscan.shape[0]):
        p = dscan[i]
        flags[p] &= ~clear
        inserted[p] = now
        checked[p] = now


def _bits_build_py(node_map, k):
    n = node_map.shape[0]
    bits = np.zeros((k, (n + 63) >> 6), np.uint64)
    one = np.uint64(1)
    for p in range(n):
        v = node_map[p]
        if v < k:
            bits[v, p >> 6] |= one << np.uint64(p & 63)
    return bits


@helper(inline=True)
def _word_mask(p, end):
    # (w, m): the word holding bit p and the mask of its bits in [p, end)
    w = p >> 6
    lo = p & 63
    hi = min(end - (w << 6), 64)
    if hi - lo == 64:
        return w, ~np.uint64(0)
    return w, ((np.uint64(1) << np.uint64(hi - lo)) - np.uint64(1)) << np.uint64(lo)




def _bits_range_py(bits, row, start, end, value):
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


def _move_pages_py(node_map, bits, use_bits, blocks, used, pages, cur, dsts, block):
    # Memory.move: page map, node bitmaps, pages per node and per block, one pass
    one = np.uint64(1)
    for i in range(pages.shape[0]):
        p = pages[i]
        c, d = cur[i], dsts[i]
        node_map[p] = d
        if use_bits:
            b = one << np.uint64(p & 63)
            bits[c, p >> 6] &= ~b
            bits[d, p >> 6] |= b
        used[d] += 1
        used[c] -= 1
        q = p // block
        blocks[q, c] -= 1
        blocks[q, d] += 1


def _set_active_py(flags, node_map, pages, on, active, setbits, keep, nr_active, row,
                   use_row, sel, use_sel, sel_val):
    # LRU._set_active: the pages (with use_sel: those with sel[i] == sel_val) whose
    # ACTIVE differs from `on` (read before any change, as numpy's gather does) and
    # that are allocated change flags, count and bit; returns how many were selected.
    # The pages considered, then those that differ, are listed by branch-free passes;
    # the counts go to four interleaved lanes and a word's bits are gathered until the
    # next page's word differs (no chain through one counter or word): a hand's batch
    # of 300,000 active pages with 2-10% idle, 3.2 -> 1.4 ns a page
    n = pages.shape[0]
    idx = np.empty(n, np.int64)
    k = 0
    if use_sel:
        for i in range(n):
            idx[k] = i
            k += sel[i] == sel_val
    else:
        for i in range(n):
            idx[i] = i
        k = n
    m = 0
    for j in range(k):
        i = idx[j]
        p = pages[i]
        idx[m] = i
        m += (((flags[p] & active) != 0) != on) and node_map[p] != 255
    one = np.uint64(1)
    lanes = np.zeros((4, nr_active.shape[0]), np.int64)
    w = -1
    acc = np.uint64(0)
    for j in range(m):
        p = pages[idx[j]]
        lanes[j & 3, node_map[p]] += 1
        flags[p] = (flags[p] | setbits) & keep
        if use_row:
            q = p >> 6
            if q != w:
                if w >= 0:
                    row[w] = row[w] | acc if on else row[w] & ~acc
                w = q
                acc = np.uint64(0)
            acc |= one << np.uint64(p & 63)
    if use_row and w >= 0:
        row[w] = row[w] | acc if on else row[w] & ~acc
    sign = 1 if on else -1
    for r in range(nr_active.shape[0]):
        nr_active[r] += sign * (lanes[0, r] + lanes[1, r] + lanes[2, r] + lanes[3, r])
    return k


def _move_counts_py(flags, mask, pages, cur, dsts, nr):
    # LRU.on_moves: the moved pages with flags & mask leave cur's count for dsts'
    for i in range(pages.shape[0]):
        if flags[pages[i]] & mask:
            nr[cur[i]] -= 1
            nr[dsts[i]] += 1


def _list_counts_py(pages, node_map, flags, mask, inserted, hist, kept, sign):
    # hist[node, list, index] += sign for each page on a node kept (list 1: flags & mask
    # set; index: its insertion index)
    for i in range(pages.shape[0]):
        p = pages[i]
        d = node_map[p]
        if d != 255 and kept[d]:
            hist[d, 1 if flags[p] & mask else 0, inserted[p]] += sign


def _list_counts_numpy(pages, node_map, flags, mask, inserted, hist, kept, sign):
    d = node_map[pages]
    ok = d != 255
    ok[ok] = kept[d[ok]]
    p, d = pages[ok], d[ok]
    np.add.at(hist, (d, ((flags[p] & mask) != 0).astype(np.int64), inserted[p]), sign)


def _relocate_sums_py(pages, cur, dsts, starts, ends, read, write, rank, epoch, stamp,
                      sums, counts):
    # Simulation._relocate: per-node sums of the moved pages' read and write rates
    # (rows: read by destination, read by source, write by destination, write by
    # source, each summed in page order as np.bincount does), moves per source and
    # destination node, promotions (rank falls), ping-pongs (promoted within one stamp
    # of its demotion, uint8 arithmetic) and the demoted pages' stamps
    m = starts.shape[0]
    npro = 0
    pingpong = 0
    for i in range(pages.shape[0]):
        p = pages[i]
        j = _upper(starts, p, 0, m) - 1  # the segment holding p: the last start <= p
        r = 0.0
        w = 0.0
        if j >= 0 and p < ends[j]:
            r = read[j]
            w = write[j]
        c, d = cur[i], dsts[i]
        sums[0, d] += r
        sums[1, c] += r
        sums[2, d] += w
        sums[3, c] += w
        counts[0, c] += 1
        counts[1, d] += 1
        if rank[d] < rank[c]:
            npro += 1
            st = np.int64(epoch[p])
            if st != 0 and ((stamp - st) & 255) % 255 <= 1:
                pingpong += 1
        else:
            epoch[p] = stamp
    return npro, pingpong


def _range_movable_py(node_map, starts, ends, dst, total):
    # Simulation._movable of the pages of ranges [starts[r], ends[r]) in order (the
    # ranges disjoint, so each page once): those allocated and not on dst, with nodes
    pages = np.empty(total, np.int64)
    cur = np.empty(total, np.uint8)
    n = 0
    for r in range(starts.shape[0]):
        for p in range(starts[r], ends[r]):
            c = node_map[p]
            if c != 255 and c != dst:
                pages[n] = p
                cur[n] = c
                n += 1
    return pages, cur, n


def _relocate_ranges_py(node_map, bits, use_bits, blocks, used, block, flags, mask, nr,
                        starts, ends, dst, room, f_starts, f_ends, read, write, rank,
                        epoch, stamp, sums, counts):
    # Simulation.migrate of the pages of disjoint ranges to dst, range by range: the
    # first `room` allocated pages not on dst get, page by page, what move_pages,
    # move_counts and relocate_sums do to a page list (none of them reads what another
    # writes, so one pass in page order does the same); returns (moved, promotions,
    # ping-pongs). Their per-page bodies are repeated here on purpose: as compiled
    # helpers (even inlined) the pass took 4x as long (60fdac1, reverted)
    one = np.uint64(1)
    m = f_starts.shape[0]
    n = 0
    npro = 0
    pingpong = 0
    for r in range(starts.shape[0]):
        if n >= room:
            break
        j = _upper(f_starts, starts[r], 0, m) - 1
        for p in range(starts[r], ends[r]):
            c = node_map[p]
            if c == 255 or c == dst:
                continue
            if n >= room:
                break
            n += 1
            # move_pages
            node_map[p] = dst
            if use_bits:
                b = one << np.uint64(p & 63)
                bits[c, p >> 6] &= ~b
                bits[dst, p >> 6] |= b
            used[dst] += 1
            used[c] -= 1
            q = p // block
            blocks[q, c] -= 1
            blocks[q, dst] += 1
            # move_counts
            if flags[p] & mask:
                nr[c] -= 1
                nr[dst] += 1
            # relocate_sums (the segment by a forward walk: p ascends within a range)
            while j + 1 < m and f_starts[j + 1] <= p:
                j += 1
            rr = 0.0
            ww = 0.0
            if j >= 0 and p < f_ends[j]:
                rr = read[j]
                ww = write[j]
            sums[0, dst] += rr
            sums[1, c] += rr
            sums[2, dst] += ww
            sums[3, c] += ww
            counts[0, c] += 1
            counts[1, dst] += 1
            if rank[dst] < rank[c]:
                npro += 1
                st = np.int64(epoch[p])
                if st != 0 and ((stamp - st) & 255) % 255 <= 1:
                    pingpong += 1
            else:
                epoch[p] = stamp
    return n, npro, pingpong


def _draw_pairs_py(u, s, e, out):
    # DAMON's damon_rand(start, end) twice per region: out[:R] then out[R:], from the
    # doubles u of g.random((2, R)) flattened
    r = s.shape[0]
    for k in range(2):
        for i in range(r):
            p = np.int64(u[k * r + i] * np.float64(e[i] - s[i])) + s[i]
            out[k * r + i] = min(p, e[i] - 1)


def _slow_hits_py(acc, start, end, node_map, top, by, dec, only_demoted, keys, room):
    # IDT._on_sample: the regions accessed whose middle page is allocated off `top`
    # (and, with only_demoted, was demoted by IDT: by > 0); their pages in all; the
    # pages of those charged to each awaiting decision keys[k] = (by - 1) * 256 + dec
    # of the middle page; and how many lead before the first larger than `room`
    r = acc.shape[0]
    out = np.empty(r, np.int64)
    sums = np.zeros(keys.shape[0], np.int64)
    n = 0
    total = 0
    nfit = -1
    for i in range(r):
        if acc[i]:
            m = (start[i] + end[i] - 1) // 2
            c = node_map[m]
            if c != top and c != 255 and (by[m] > 0 or not only_demoted):
                size = end[i] - start[i]
                if nfit < 0 and size > room:
                    nfit = n
                out[n] = i
                n += 1
                total += size
                if by[m] > 0:
                    key = (np.int64(by[m]) - 1) * 256 + np.int64(dec[m])
                    for k in range(keys.shape[0]):
                        if keys[k] == key:
                            sums[k] += size
    return out[:n], total, sums, n if nfit < 0 else nfit


def _bisect_throughput_py(a, b, c, compute_ns, mlp, threads, x_cap):
    # solve_throughput's root of x - threads / t(x), t(x) = (compute_ns + sum_i a_i
    # (1 + u_i / (2 (1 - u_i))) / mlp) 1e-9 with u_i = b_i + x c_i, by its bisection
    lo = 0.0
    hi = 0.0
    for it in range(61):
        x = 0.0 if it == 0 else 0.5 * (lo + hi)
        stall = 0.0
        for i in range(a.shape[0]):
            u = b[i] + x * c[i]
            stall += a[i] * (1.0 + u / (2.0 * (1.0 - u)))
        t = (compute_ns + stall / mlp) * 1e-9
        if it == 0:
            hi = threads / t  # unloaded throughput: an upper bound
            if hi >= x_cap:
                hi = x_cap * (1 - 1e-12)
            continue
        if x - threads / t > 0:
            hi = x
        else:
            lo = x
        if hi - lo <= 1e-9 * hi:
            break
    return lo


def _range_node_counts_py(node_map, starts, ends, nnodes):
    # pages of each range on each node, last column unallocated (node >= nnodes)
    out = np.zeros((starts.shape[0], nnodes + 1), np.int64)
    for i in range(starts.shape[0]):
        for p in range(starts[i], ends[i]):
            out[i, min(np.int64(node_map[p]), nnodes)] += 1
    return out


def _pages_not_on_py(node_map, blocks, starts, ends, nodes, block, pages, of, fill):
    # Memory.pages_not_on: the blocks with allocated pages off the range's node (by
    # their counts), then their pages in the range off it, range by range; counted
    # only, or (fill) written to pages and of
    n = 0
    for i in range(starts.shape[0]):
        s, e, d = starts[i], ends[i], nodes[i]
        for b in range(s // block, (e - 1) // block + 1 if e > s else s // block):
            other = -np.int64(blocks[b, d])
            for k in range(blocks.shape[1]):
                other += blocks[b, k]
            if other <= 0:
                continue  # every allocated page of the block is on d
            for p in range(max(s, b * block), min(e, (b + 1) * block)):
                v = node_map[p]
                if v != 255 and v != d:
                    if fill:
                        pages[n] = p
                        of[n] = i
                    n += 1
    return n


@helper(inline=True)
def _lap_bytes(node_map, p0, p1, node, byte, lut, out, cnt, fill):
    # `_pages_by_byte`'s work on the map's bytes [p0, p1): each page of `node` counted
    # under its key lut[byte[p]] (fill=False; returns how many) or placed at its key's
    # next slot of out (returns 0)
    seen = 0
    for p in range(p0, p1):
        if node_map[p] == node:
            k = lut[byte[p]]
            if fill:
                out[cnt[k]] = p
                cnt[k] += 1
            else:
                cnt[k + 1] += 1
                seen += 1
    return seen




def _pages_by_byte_py(node_map, words, blocks, block, node, byte, lut, out):
    # the pages on `node` in address order, stably sorted by lut[byte[p]] into out (a
    # counting sort over 256 keys: one pass counts, one places); only blocks whose
    # counts hold pages of the node are read, and in them the map as uint64 `words`:
    # only words holding the node's byte are read byte by byte (a line of eight words
    # at a time was slower at AutoTiering's density); returns how many pages were found
    n = node_map.shape[0]
    cnt = np.zeros(257, np.int64)
    lo = np.uint64(0x0101010101010101)
    hi = np.uint64(0x8080808080808080)
    pat = np.uint64(node) * lo
    wpb = block // 8
    nw = words.shape[0]
    seen = 0
    for fill in range(2):
        if fill:
            if seen != out.shape[0]:
                return seen
            for k in range(256):
                cnt[k + 1] += cnt[k]
        for b in range(blocks.shape[0]):
            if blocks[b, node] == 0:
                continue
            for w in range(b * wpb, min((b + 1) * wpb, nw)):
                x = words[w] ^ pat
                if ((x - lo) & ~x & hi) != 0:  # some byte of the word is the node's
                    seen += _lap_bytes(node_map, w * 8, w * 8 + 8, node, byte, lut, out,
                                       cnt, fill)
            seen += _lap_bytes(node_map, max(b * block, nw * 8), min((b + 1) * block, n),
                               node, byte, lut, out, cnt, fill)
    return seen


def _spend_budgets_py(rate, dw, rem):
    # RateSource.first_access_lazy's epoch step: lam = rate * dw; pages with
    # lam >= rem and rate > 0 are hit (their index and budget returned, their budget
    # set to inf); every budget then loses lam (inf stays inf). A counting pass first,
    # so no buffer is larger than the hits (growing one in the loop made numba's loop
    # ten times slower)
    n = rate.shape[0]
    one = dw.shape[0] == 1
    k = 0
    for i in range(n):
        r = rate[i]
        if r * (dw[0] if one else dw[i]) >= rem[i] and r > 0:
            k += 1
    hit = np.empty(k, np.int64)
    left = np.empty(k)
    k = 0
    for i in range(n):
        r = rate[i]
        lam = r * (dw[0] if one else dw[i])
        b = rem[i]
        if lam >= b and r > 0:
            hit[k] = i
            left[k] = b
            k += 1
            b = np.inf
        rem[i] = b - lam
    return hit, left


def _halve_at_py(reads, writes, clk, hps, clock, max_shift):
    # HeMem's lazy cooling of pages hps: counts >> min(max(clock - clk, 0), max_shift),
    # written back with clk = clock; returns the cooled (reads, writes)
    n = hps.shape[0]
    r = np.empty(n, np.int64)
    w = np.empty(n, np.int64)
    for i in range(n):
        h = hps[i]
        s = min(clock - clk[h], max_shift)
        if s < 0:
            s = 0
        a = reads[h] >> s
        b = writes[h] >> s
        reads[h] = a
        writes[h] = b
        clk[h] = clock
        r[i] = a
        w[i] = b
    return r, w


def _tier_shares_py(tier, reads, writes, clk, clock, max_shift, none, src_tier, dst_tier,
                    zero_partners, src, cs, dst, cd, p_src, p_dst, src_up, dst_up, hs, hd):
    # Colloid on HeMem: every tracked page cooled in place (as halve_at); the pages of
    # src_tier of positive count (src, in index order, with their counts cs and
    # shares count / total) and the partners, the pages of dst_tier (of positive
    # count unless zero_partners), listed in ascending count, equal counts in index
    # order (a stable argsort of the shares, which count / total keeps in the counts'
    # order), with their shares; src_up: the sources in ascending count. By a counting
    # sort over the counts (histograms hs, hd); the arrays after zero_partners are
    # the caller's, of at least len(tier) entries (hs, hd: any size). Two passes over
    # the pages without branches (the cooling with the counts into dst_up, then the
    # lists: each page written at the end of both, which advance where it belongs:
    # with the rest, 0.34 -> 0.21 ms a call at 56,320 huge pages); the rest over the
    # two lists.
    # Returns (total, sources, partners, sorted): not sorted (src_up and the partners
    # in index order, dst_up their counts) when a count reaches len(hs)
    n = tier.shape[0]
    total = np.int64(0)
    ch = dst_up  # each page's count: scratch until the partners are placed
    for h in range(n):
        tr = tier[h] != none
        s = min(max(clock - clk[h], 0), max_shift)
        r = reads[h] >> s
        w = writes[h] >> s
        reads[h] = r if tr else reads[h]
        writes[h] = w if tr else writes[h]
        clk[h] = clock if tr else clk[h]
        x = r + w
        ch[h] = x
        total += x if tr else 0
    nsrc = ndst = 0
    for h in range(n):
        x = ch[h]
        t = tier[h]
        src[nsrc] = h
        cs[nsrc] = x
        dst[ndst] = h
        cd[ndst] = x
        nsrc += (t == src_tier) & (x > 0)
        ndst += (t == dst_tier) & ((x > 0) | zero_partners)
    ft = np.float64(total) if total > 0 else np.float64(1.0)  # no shares without counts
    for i in range(nsrc):
        p_src[i] = np.float64(cs[i]) / ft
    cap = hs.shape[0]
    ok = True
    for i in range(nsrc):
        if cs[i] >= cap:
            ok = False
    for j in range(ndst):
        if cd[j] >= cap:
            ok = False
    if not ok:
        for j in range(ndst):
            src_up[j] = dst[j]
            dst_up[j] = cd[j]
            p_dst[j] = np.float64(cd[j]) / ft
        return total, nsrc, ndst, False
    hs[:] = 0
    hd[:] = 0
    for i in range(nsrc):
        hs[cs[i]] += 1
    for j in range(ndst):
        hd[cd[j]] += 1
    a = 0  # hs[c], hd[c]: where count c's first entry goes
    b = 0
    for c in range(cap):
        x, y = hs[c], hd[c]
        hs[c], hd[c] = a, b
        a += x
        b += y
    for i in range(nsrc):
        c = cs[i]
        src_up[hs[c]] = i
        hs[c] += 1
    for j in range(ndst):  # the partners placed by count: pages and shares
        c = cd[j]
        k = hd[c]
        dst_up[k] = dst[j]
        p_dst[k] = np.float64(c) / ft
        hd[c] = k + 1
    for j in range(ndst):
        dst[j] = dst_up[j]
    return total, nsrc, ndst, True


def _pick_pairs_py(p_src, src_up, vals, partner, free_slots, dp, most, out_i, out_j):
    # Colloid's pairs (policies.colloid.pick_pairs): each round, every unused source i
    # takes the first unused partner k with vals[k] >= p_i - left (vals ascending), or
    # a free frame; the largest difference in (0, left] pairs first, equal differences
    # by lowest i. The sources are walked in ascending share (src_up) so the partner
    # pointer only moves forward: O(sources + partners) a round, not a search each
    n, m, ns = p_src.shape[0], vals.shape[0], src_up.shape[0]
    alive = np.ones(m, np.bool_)
    used = np.zeros(n, np.bool_)
    left = dp
    npairs = 0
    while npairs < most and left > 0:
        best = -np.inf
        bi = -1
        bk = -1
        bfree = False
        k = 0
        for q in range(ns):
            i = src_up[q]
            p = p_src[i]
            x = p - left
            while k < m and (vals[k] < x or not alive[k]):
                k += 1
            part = vals[k] if k < m and not used[i] else np.inf
            diff = p - part if part < p else -np.inf
            use_free = False
            if free_slots > 0:
                fd = p if (not used[i]) and p <= left and p > 0 else -np.inf
                use_free = fd >= diff
                if fd > diff:
                    diff = fd
            if diff > best or (diff == best and i < bi):
                best, bi, bk, bfree = diff, i, k, use_free
        if bi < 0 or not np.isfinite(best) or best <= 0:
            break
        out_i[npairs] = bi
        if bfree:
            out_j[npairs] = -1
            free_slots -= 1
        else:
            out_j[npairs] = partner[bk]
            alive[bk] = False
        npairs += 1
        used[bi] = True
        left -= best
    return npairs


def _run_event_counts_py(s, ev, nev):
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


def _times_sorted_py(ws, ta, wa, out):
    # Timeline.time_at_work of ascending works ws (numpy's arithmetic, the breakpoint
    # found by a forward walk instead of a search per work) into out; returns whether
    # the times strictly ascend (else the caller sorts the times themselves)
    n = ws.shape[0]
    nb = wa.shape[0]
    i = 0
    ok = True
    for q in range(n):
        w = ws[q]
        while i < nb and wa[i] < w:
            i += 1
        t = _time_at(w, i, ta, wa)
        out[q] = t
        if not (t == t) or (q > 0 and not t > out[q - 1]):
            ok = False
    return ok


def _fill_ranges_py(arr, starts, ends, value):
    for r in range(starts.shape[0]):
        for p in range(starts[r], ends[r]):
            arr[p] = value


def _bits_set_py(row, pages, value):
    one = np.uint64(1)
    for i in range(pages.shape[0]):
        p = pages[i]
        if value:
            row[p >> 6] |= one << np.uint64(p & 63)
        else:
            row[p >> 6] &= ~(one << np.uint64(p & 63))


def _bits_get_py(row, pages, out):
    for i in range(pages.shape[0]):
        p = pages[i]
        out[i] = ((row[p >> 6] >> np.uint64(p & 63)) & np.uint64(1)) != 0


def _bits_any_py(row, start, end):
    # whether a bit of [start, end) is set
    p = start
    while p < end:
        w, m = _word_mask(p, end)
        if row[w] & m:
            return True
        p = (w + 1) << 6
    return False


@helper
def _skip_empty(row, sel, sel_on, use_sel, w, wlast, wend):
    # `_walk`'s next address after a word without a hit that ends at wend: past the
    # words w .. wlast - 1 without one either (row's bits, with sel's where use_sel:
    # set if sel_on, else clear), in a loop of two loads and a test a word (the hands
    # of the inactive lists cross stretches of other lists' and nodes' pages); the
    # window's last word, wlast, is left to `_walk`, which masks it
    if w >= wlast:
        return wend
    if not use_sel:
        while w < wlast and row[w] == 0:
            w += 1
    elif sel_on:
        while w < wlast and (row[w] & sel[w]) == 0:
            w += 1
    else:
        while w < wlast and (row[w] & ~sel[w]) == 0:
            w += 1
    return np.int64(w) << 6


@helper
def _walk_init(start, limit, npages, s, tm):
    # `_walk`'s state for a hand from `start`: [pos, end, i, scanned, chunk, n, j, nxt,
    # prev, last, open, q, done]; tm[0] the least pass time met
    s[0] = start % max(npages, 1)
    s[1] = 0
    s[2] = 0
    s[3] = 0
    s[4] = max(4 * limit, 4096)
    s[5] = 0
    s[6] = 0
    s[7] = np.iinfo(np.int64).max
    s[8] = -1
    s[9] = -1
    s[10] = 0
    s[11] = 0
    s[12] = 0
    tm[0] = np.inf


@helper
def _walk(row, npages, limit, flags, mask, value, use_flags, sel, sel_on, use_sel,
             bounds, times, use_bounds, out, which, s, tm):
    # the hand of `pages_on_bits` (its state in s, tm: `_walk_init`), resumable: the
    # next hits into out (and their intervals into which) until out is full or the
    # hand is done (s[12]); returns how many. A full buffer stops at the next hit's
    # address, where the next call reloads its word: the caller may change the
    # bitmaps' bits of the pages handed out meanwhile, none of those ahead
    pos, end, i, scanned, chunk, n = s[0], s[1], s[2], s[3], s[4], s[5]
    j, nxt, prev, last, opened, q = s[6], s[7], s[8], s[9], s[10], s[11]
    tmin = tm[0]
    m = bounds.shape[0]
    lastb = m - 2
    big = np.iinfo(np.int64).max
    cap = out.shape[0]
    k = 0
    full = False
    while True:
        if not opened:
            if n >= limit or scanned >= npages:
                s[12] = 1
                break
            end = min(pos + chunk, npages, pos + npages - scanned)
            i = pos
            opened = 1
        stop = False
        while i < end:
            w = i >> 6
            wend = min((w + 1) << 6, end)
            word = row[w]
            if use_sel:
                word &= sel[w] if sel_on else ~sel[w]
            word >>= np.uint64(i & 63)
            if wend - i < 64:
                word &= (np.uint64(1) << np.uint64(wend - i)) - np.uint64(1)
            if word == 0:
                i = _skip_empty(row, sel, sel_on, use_sel, w + 1, (end - 1) >> 6, wend)
                continue
            while word:
                a = i + np.int64(cttz(word))
                if not use_flags or (flags[a] & mask) == value:
                    if n == limit:  # a hit past the limit: the window ends after the last
                        end = last + 1
                        stop = True
                        break
                    if k == cap:  # resumed here
                        i = a
                        full = True
                        break
                    out[k] = a
                    if use_bounds:
                        if a < prev or n == 0 or a >= nxt:  # another interval
                            if a < prev or n == 0:
                                j = _upper(bounds, a, 0, m) - 1
                            else:
                                while j + 1 < m and bounds[j + 1] <= a:
                                    j += 1
                            q = min(max(j, 0), lastb)
                            nxt = bounds[j + 1] if j + 1 < m else big
                            if times[q] < tmin:
                                tmin = times[q]
                        prev = a
                        which[k] = q
                    k += 1
                    n += 1
                    last = a
                word &= word - np.uint64(1)
            if stop or full:
                break
            i = wend
        if full:
            break
        scanned += end - pos
        pos = end % npages
        chunk = min(2 * chunk, 1 << 22)
        opened = 0
    s[0], s[1], s[2], s[3], s[4], s[5] = pos, end, i, scanned, chunk, n
    s[6], s[7], s[8], s[9], s[10], s[11] = j, nxt, prev, last, opened, q
    tm[0] = tmin
    return k


# helpers (`_HELPERS`)


def _pages_on_bits_py(row, npages, start, limit, flags, mask, value, use_flags, sel,
                      sel_on, use_sel, bounds, times, use_bounds):
    # with use_bounds also each page's interval of `bounds` (`PassTimes.index`:
    # searchsorted(bounds, a, "right") - 1, clipped, by a forward walk over the ascending
    # pages, bisecting where the hand wraps) and the least of their `times`: the hand
    # (`_walk`) in one call, into a buffer that holds every hit
    out = np.empty(min(limit, npages), np.int64)
    which = np.empty(out.shape[0] if use_bounds else 0, np.int64)
    s = np.empty(13, np.int64)
    tm = np.empty(1)
    _walk_init(start, limit, npages, s, tm)
    n = _walk(row, npages, limit, flags, mask, value, use_flags, sel, sel_on, use_sel,
              bounds, times, use_bounds, out, which, s, tm)
    return out[:n], s[0], s[3], which[:n], tm[0]


def _lru_sweep_py(row, npages, start, limit, sel, sel_on, bounds, times, w_tab, starts,
                  soff, rate, ends, w_a, use_max, whi, multi, st, jump, pages, which, lam,
                  u, ref, flags, node_map, on, active, setbits, keep, nr_active, sel_val,
                  cold, res):
    # a CLOCK hand's pass and what reclaim makes of it (`LRU.sweep`), by blocks of
    # `pages`' size: the hand (`_walk`, over the node's pages whose bit in `sel` is
    # sel_on), each page's accessed bit since the hand's last pass (`_draw_pages`, as
    # `_draw_accessed` draws them), then the pages whose bit is sel_val and whose ACTIVE
    # differs from `on` changed as `_set_active` changes them (flags, count, their bit
    # in sel, which is the ACTIVE bitmap), the others listed into cold while it has
    # room. res: [hand position, addresses scanned, pages, pages whose bit is sel_val,
    # pages listed]
    s = np.empty(13, np.int64)
    tm = np.empty(1)
    _walk_init(start, limit, npages, s, tm)
    one = np.uint64(1)
    nf = np.zeros(1, np.uint8)
    prev, c = np.nan, 0.0
    nsel = 0
    ncold = 0
    while s[12] == 0:
        k = _walk(row, npages, limit, nf, np.uint8(0), np.uint8(0), False, sel, sel_on,
                  True, bounds, times, True, pages, which, s, tm)
        if k == 0:
            continue
        prev, c = _draw_pages(lam, u, pages[:k], which[:k], False, w_tab, starts, soff,
                              rate, ends, w_a, use_max, whi, multi, st, jump, ref, 0, prev,
                              c)
        for i in range(k):
            p = pages[i]
            if ref[i] == sel_val:
                nsel += 1
                f = flags[p]
                d = node_map[p]
                if (((f & active) != 0) != on) and d != 255:
                    flags[p] = (f | setbits) & keep
                    nr_active[d] += 1 if on else -1
                    b = one << np.uint64(p & 63)
                    sel[p >> 6] = (sel[p >> 6] | b) if on else (sel[p >> 6] & ~b)
            elif ncold < cold.shape[0]:
                cold[ncold] = p
                ncold += 1
    res[0], res[1], res[2], res[3], res[4] = s[0], s[3], s[5], nsel, ncold


def _mglru_age_py(row, npages, draw, w_tab, starts, soff, rate, ends, w_a, use_max, whi,
                  multi, st, jump, pages, which, lam, u, ref, gen, slots, fold, old_st,
                  fold_st, tag, young_st, arrived_st, nonleaf, pmd, res):
    # MGLRU's aging walk of one node and its generation update (`PteScan.age_node`):
    # the node's pages in address order (the set bits of its bitmap row), by blocks of
    # `pages`' size, each page's accessed bit drawn as `draw_accessed` draws it (given
    # draw; else none is young and the stream is not touched), then its generation:
    # the oldest folded into the next (given fold), young -> young_st, one of another
    # node's -> arrived_st, its bit moved between the rows of `slots` (`SlotBits`).
    # res: [pages, PTE checks (`PteScan._walk_cost`)]
    nw = row.shape[0]
    b = pages.shape[0]
    one = np.uint64(1)
    cost = (npages + pmd - 1) // pmd  # a check per PMD entry, then the young PMDs' PTEs
    cur, cnt, hot = np.int64(-1), np.int64(0), False
    prev, c = np.nan, 0.0
    n = 0
    w = 0
    word = row[0] if nw > 0 else np.uint64(0)
    while True:
        k = 0
        while k < b:
            while word == 0 and w + 1 < nw:
                w += 1
                word = row[w]
            if word == 0:
                break
            pages[k] = (np.int64(w) << 6) + np.int64(cttz(word))
            k += 1
            word &= word - one
        if k == 0:
            break
        if draw:
            prev, c = _draw_pages(lam, u, pages[:k], which[:k], False, w_tab, starts, soff,
                                  rate, ends, w_a, use_max, whi, multi, st, jump, ref, 0,
                                  prev, c)
        for i in range(k):
            p = pages[i]
            y = draw and ref[i]
            g0 = gen[p]
            g = fold_st if fold and g0 == old_st else g0
            if y:
                g = young_st
            elif (g >> 2) != tag:
                g = arrived_st
            if g != g0:
                gen[p] = g
                b1 = one << np.uint64(p & 63)
                if g0 != 0:
                    slots[g0 & 3, p >> 6] &= ~b1
                slots[g & 3, p >> 6] |= b1
            q = p // pmd
            if q != cur:
                if hot:
                    cost += cnt
                cur, cnt, hot = q, 0, False
            cnt += 1
            hot = hot or y
        n += k
        if k < b:
            break
    if hot:
        cost += cnt
    res[0] = n
    res[1] = cost if nonleaf else n


def _cooled_bins_py(cnt, pclk, clock, max_shift, nbins):
    out = np.zeros(nbins + 1, np.int64)
    for p in range(cnt.shape[0]):
        out[_cooled_bin(cnt[p], pclk[p], clock, max_shift, nbins)] += 1
    return out


def _set_counts_py(cnt, pclk, pages, new, clock, max_shift, nbins, ebins, track):
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


def _split_bins_py(cnt, pclk, node, sp, hp, npages, unalloc, clock, max_shift, nbins):
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


def _memtis_cool_py(hs, d, hp, cnt, pclk, may_hot, ebins, track, hot_thr, bp_active,
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


@helper(inline=True)
def _phash(p, m):
    # page p's home slot in a table of m + 1 slots (a power of two): a multiply, then
    # its upper bits folded down (a product's low bits depend only on p's low bits)
    x = int(p) * 73244475
    return (x ^ (x >> 29)) & m




def _pmap_put_py(keys, vals, pages, idx):
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




def _pmap_get_py(keys, vals, pages, out):
    # out[i] = the value of pages[i], -1 if absent
    m = keys.shape[0] - 1
    for i in range(pages.shape[0]):
        h = _pmap_find(keys, pages[i], m)
        out[i] = vals[h] if h >= 0 else -1


def _pmap_pop_py(keys, vals, pages, out):
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


def _pmap_remap_py(keys, vals, new):
    # every value v in the table becomes new[v]
    for h in range(keys.shape[0]):
        if keys[h] != -1:
            vals[h] = new[vals[h]]


_PY = {"bits_build": _bits_build_py, "bits_range": _bits_range_py,
       "bits_set": _bits_set_py, "bits_get": _bits_get_py, "bits_any": _bits_any_py,
       "move_pages": _move_pages_py, "set_active": _set_active_py,
       "relocate_sums": _relocate_sums_py,
       "move_counts": _move_counts_py, "list_counts": _list_counts_py,
       "range_movable": _range_movable_py, "fill_ranges": _fill_ranges_py,
       "relocate_ranges": _relocate_ranges_py, "draw_pairs": _draw_pairs_py,
       "slow_hits": _slow_hits_py, "range_node_counts": _range_node_counts_py,
       "pages_not_on": _pages_not_on_py, "pages_by_byte": _pages_by_byte_py, "halve_at": _halve_at_py, "pick_pairs": _pick_pairs_py,
       "tier_shares": _tier_shares_py,
       "spend_budgets": _spend_budgets_py, "bisect_throughput": _bisect_throughput_py,
       "pages_on_bits": _pages_on_bits_py,
       "list_hist": _list_hist_py, "list_emit": _list_emit_py, "table_min": _table_min_py,
       "nimble_inactive": _nimble_inactive_py, "nimble_active": _nimble_active_py,
       "argsort_stable": _argsort_stable_py, "argsort_bucket": _argsort_bucket_py,
       "merge_sorted": _merge_sorted_py,
       "run_event_counts": _run_event_counts_py,
       "times_sorted": _times_sorted_py,
       "poll_faults": _poll_faults_py, "cal_push": _cal_push_py, "cal_pop": _cal_pop_py,
       "cal_rebucket": _cal_rebucket_py, "scan_arm": _scan_arm_py, "lru_mark": _lru_mark_py,
       "similar_pairs": _similar_pairs_py, "sample_account": _sample_account_py,
       "sub_expected": _sub_expected,
       "draw_below": _draw_below_py, "sub_expected_eps": _sub_expected_eps,
       "draw_accessed": _draw_accessed_py, "lru_sweep": _lru_sweep_py,
       "mglru_age": _mglru_age_py,
       "first_seen": _first_seen_py, "sorted_find": _sorted_find_py,
       "cooled_bins": _cooled_bins_py, "memtis_cool": _memtis_cool_py,
       "set_counts": _set_counts_py, "split_bins": _split_bins_py,
       "pmap_put": _pmap_put_py, "pmap_get": _pmap_get_py, "pmap_pop": _pmap_pop_py,
       "pmap_remap": _pmap_remap_py}

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
    return _kernel("argsort_stable")(keys)


def unique_counts(a):
    """`np.unique(a, return_counts=True)` of integers: numpy's sort, then the runs
    counted in one compiled pass, where numpy's unique makes five more over the sorted
    copy (MEMTIS's sample pages; the sort is most of the cost)."""
    a = np.asarray(a)
    if a.dtype.kind not in "iu" or not _numba():
        return np.unique(a, return_counts=True)
    s = np.sort(a.ravel())
    u, c = _kernel("run_event_counts")(s, np.zeros(s.shape[0], np.int8), np.int64(1))
    return u, c[:, 0].copy()


def unique_event_counts(p, ev, nev: int):
    """(np.unique(p), counts) with counts[i, e] the entries of the i-th distinct page
    whose event ev is e (0 <= e < nev): what np.unique(p, return_inverse=True) and a
    bincount of inverse x nev + ev give, by numpy's sort of the pages and one compiled
    pass over the runs (PEBS's batches of samples)."""
    p = np.asarray(p, dtype=np.int64)
    ev = np.asarray(ev)
    if not _numba():
        u, inv = np.unique(p, return_inverse=True)
        return u, np.bincount(inv * nev + ev, minlength=nev * len(u)).reshape(len(u), nev)
    o = np.argsort(p)
    return _kernel("run_event_counts")(p[o], ev[o], np.int64(nev))


def by_time(works, ta, wa):
    """(order, times): the stable order of `Timeline.time_at_work(works)` (over
    breakpoints ta, wa) and the times in it, where those times strictly ascend along
    the works' own order (W is increasing, so they nearly always do): the works sorted
    (`argsort_untied`) and their times by one walk over the breakpoints, instead of a
    search per work and a sort of the times (PEBS's samples); None otherwise, and
    without numba."""
    if not _numba() or wa.shape[0] < 2:
        return None
    order, ws = argsort_untied(works)
    out = np.empty(ws.shape[0])
    if not _kernel("times_sorted")(ws, np.ascontiguousarray(ta, dtype=np.float64),
                                   np.ascontiguousarray(wa, dtype=np.float64), out):
        return None
    return order, out


def argsort_untied(keys):
    """(`np.argsort(keys, kind="stable")`, the keys in that order) of float64 keys.
    From SMALL to BUCKET_MAX keys, a bucket sort (`_argsort_bucket_py`; for
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
    if SMALL <= n <= BUCKET_MAX and _numba():
        order, k = np.empty(n, np.int64), np.empty(n)
        if _kernel("argsort_bucket")(keys, order, k):
            return order, k
    order = np.argsort(keys)
    k = keys[order]
    if k.shape[0] > 1 and (k[-1] != k[-1] or not bool(np.all(k[1:] != k[:-1]))):
        order = argsort_stable(keys)
        k = keys[order]
    return order, k


def ring_bits(h: np.ndarray, newest: int, valid: int, nbits: int) -> np.ndarray:
    """(R, valid) uint8: the `valid` newest bits of each ring buffer `h` ((R, words)
    uint64 of `nbits` bits, the newest at position `newest`), newest first."""
    h = np.asarray(h, dtype=np.uint64)
    p = (int(newest) - np.arange(int(valid))) % int(nbits)
    return ((h[:, p >> 6] >> (p & 63).astype(np.uint64)) & np.uint64(1)).astype(np.uint8)


def window_counts(h: np.ndarray, newest: int, valid: int, window: int,
                  nbits: int) -> np.ndarray:
    """(R, windows): accessed bits in every sliding window of `window` bits over the
    `valid` newest bits of each ring buffer (one window of `valid` bits if fewer)."""
    w = min(window, valid)
    c = np.zeros((np.shape(h)[0], valid + 1), dtype=np.int32)
    np.cumsum(ring_bits(h, newest, valid, nbits), axis=1, out=c[:, 1:])
    return (c[:, w:] - c[:, :valid - w + 1]).astype(np.int64)


def _similar_pairs_numpy(h, newest, valid, window, nbits, table):
    c = window_counts(h, newest, valid, window, nbits)
    return table[c[:-1], c[1:]].all(axis=1)


def _draw_pairs_numpy(u, s, e, out):
    u = u.reshape(2, s.shape[0])
    u *= (e - s).astype(float)
    p = u.astype(np.int64)
    p += s
    np.minimum(p, e - 1, out=p)
    out[:] = p.reshape(-1)


def _slow_hits_numpy(acc, start, end, node_map, top, by, dec, only_demoted, keys, room):
    mid = (start + end - 1) // 2
    node = node_map[mid]
    j = np.flatnonzero(acc & (node != top) & (node != 255) &
                       ((by[mid] > 0) | (not only_demoted)))
    size = end[j] - start[j]
    m = mid[j]
    key = np.where(by[m] > 0, (by[m].astype(np.int64) - 1) * 256 + dec[m], -1)
    sums = np.array([int(size[key == k].sum()) for k in keys], dtype=np.int64)
    over = np.flatnonzero(size > room)
    return j, int(size.sum()), sums, int(over[0]) if over.size else j.size


def _range_node_counts_numpy(node_map, starts, ends, nnodes):
    from .field import range_node_counts_numpy
    return range_node_counts_numpy(node_map, starts, ends, nnodes)


def _fill_ranges_numpy(arr, starts, ends, value):
    from .field import range_pages
    arr[range_pages(starts, ends)] = value


def _draw_below_numpy(u, lam, out):
    np.less(u, -np.expm1(lam), out=out)
    return u.shape[0]


_NUMPY = {"similar_pairs": _similar_pairs_numpy, "sample_account": _sample_account_numpy, "draw_below": _draw_below_numpy,
          "first_seen": _first_seen_numpy,
          "fill_ranges": _fill_ranges_numpy, "draw_pairs": _draw_pairs_numpy,
          "slow_hits": _slow_hits_numpy,
          "range_node_counts": _range_node_counts_numpy, "sorted_find": _sorted_find_numpy,
          "list_counts": _list_counts_numpy}

#: every kernel by name: its Python source, compiled at the first call, or without
#: numba its numpy form
_KERNELS = {name: Kernel(py, _NUMPY.get(name)) for name, py in _PY.items()}


def _kernel(name) -> Kernel:
    return _KERNELS[name]


def similar_pairs(h, newest: int, valid: int, window: int, nbits: int,
                  table) -> np.ndarray:
    """IDT's merge test of neighbours i, i+1 (`IdtRegions._similar`): table[c_i, c_j]
    for the accessed-bit counts of every sliding window of `window` bits over the
    `valid` newest bits of each region's ring buffer of `nbits` bits ((R, words)
    uint64, the newest bit at position `newest`; one window of `valid` bits if fewer),
    stopping at the first window that fails, where numpy counts every window."""
    return _kernel("similar_pairs")(np.asarray(h, dtype=np.uint64), int(newest),
                                    int(valid), int(window), int(nbits),
                                    np.ascontiguousarray(table, dtype=np.bool_))


def sub_expected(lam, pages, which, by_page: bool, w_tab, starts, rate, ends, w_a: float,
                 use_max: bool, whi: float, init: bool = False) -> None:
    """lam[i] -= the expected accesses of page pages[i] during one field epoch (`init`:
    lam[i] = 0 - them), as `RateSource._expected` sums them (`_FieldTables.page_rate`
    times the epoch's work since the page's start, max(whi - max(W(t0), W(epoch
    start)), 0)), the page's W(t0) read from w_tab[which[i]] (`by_page`:
    w_tab[which[pages[i]]]): the same floating-point operations in the same order, one
    pass instead of a search, five gathers and six temporaries per epoch. Summed
    negated, the sum is exactly minus the positive sum (rounding is symmetric), ready
    for expm1 without a negation pass. A page's row is searched only when it is not
    the previous page's (pages come in runs of addresses from the hands and lists:
    Nimble at bench_memsim 1.6 -> 1.1 s over 403 M pages)."""
    _kernel("sub_expected")(lam, pages, which, bool(by_page), w_tab, starts, rate, ends,
                            float(w_a), bool(use_max), float(whi), bool(init))


def sub_expected_eps(lam, pages, which, by_page: bool, w_tab, cat, w_a, use_max,
                     whi) -> None:
    """`sub_expected` for every epoch of a table lookup in one pass over the pages:
    lam[i] = 0 - (epoch 0's expected accesses) - (epoch 1's) ..., in that order, so the
    same bits as one `sub_expected` per epoch. `cat`: the epochs' (starts, offsets,
    rates, ends) concatenated (`RateSource._concat`); w_a, use_max, whi per epoch."""
    starts, soff, rate, ends = cat
    _kernel("sub_expected_eps")(lam, pages, which, bool(by_page), w_tab, starts, soff,
                                rate, ends, w_a, use_max, whi)


def draw_below(u, lam, out) -> None:
    """out[i] = u[i] < -expm1(lam[i]) (lam holds minus the expected accesses): a draw
    against 1 - exp(-m), with expm1 taken once when every value is the same (a CLOCK
    hand's chunk of 65,536 pages often is) and otherwise once per run of equal values,
    compiled: the rate model's pages come in such runs (one rate per field segment,
    one clear time per hand or sample; IDT's samples at bench_scale change value at
    0.016% of their pages). The runs take libm's expm1 (`math.expm1`, as the compiled
    draws do). Where the values change too often, numpy's expm1 takes the rest: the
    same function where numpy calls libm, but where numpy dispatches it to AVX-512 it
    differs from libm's by one ulp for about 0.05% of values (seen on an AMD EPYC host,
    2026-11-29), so a draw there can differ only when u falls in that ulp (about 1e-16
    a draw). Leaves lam as it was."""
    n = lam.shape[0]
    if n and lam[0] == lam[-1] and lam.min() == lam.max():
        np.less(u, -math.expm1(float(lam[0])), out=out)
        return
    i = int(_kernel("draw_below")(u, lam, out))
    if i < n:
        np.less(u[i:], -np.expm1(lam[i:]), out=out[i:])


#: pages per block of `draw_accessed`'s expected accesses (within the L1 cache)
DRAW_BLOCK = 1024


#: PCG_DEFAULT_MULTIPLIER_128, numpy's PCG64 step's multiplier
PCG_MULT = 0x2360ED051FC65DA44385DF649FCCF645
_M64, _M128 = (1 << 64) - 1, (1 << 128) - 1
_pcg_jumps = {}


def pcg64_jump(inc: int) -> np.ndarray:
    """`_pcg64_fill`'s table for a PCG64 stream of increment inc: row k holds A =
    PCG_MULT^(k+1) and C = inc (1 + PCG_MULT + ... + PCG_MULT^k) modulo 2^128 (k + 1
    steps of the LCG from one state), each as (high, low) uint64."""
    t = _pcg_jumps.get(inc)
    if t is None:
        rows, a, c = [], 1, 0
        for _ in range(4):
            a, c = a * PCG_MULT & _M128, (c * PCG_MULT + inc) & _M128
            rows.append([a >> 64, a & _M64, c >> 64, c & _M64])
        t = _pcg_jumps[inc] = np.array(rows, np.uint64)
    return t


def _pcg_take(rng):
    """rng's PCG64 state as the kernels step it ((high, low) uint64 and `pcg64_jump`'s
    table) with what `_pcg_put` needs to put it back; None without numba or where the
    bit generator is not PCG64."""
    bg = rng.bit_generator
    if not _numba() or type(bg) is not np.random.PCG64:
        return None
    state = bg.state
    s, inc = state["state"]["state"], state["state"]["inc"]
    return bg, state, np.array([s >> 64, s & _M64], np.uint64), pcg64_jump(inc)


def _pcg_put(bg, state, st, _jump) -> None:
    """Put back the state `_pcg_take` took, as the kernels left it in st."""
    state["state"]["state"] = (int(st[0]) << 64) | int(st[1])
    bg.state = state


def draw_accessed(out, rng, pages, which, by_page: bool, w_tab, tables) -> bool:
    """`RateSource.accessed_table`'s chunks in one compiled pass: out[i] = u_i < 1 -
    exp(-m_i), m_i page i's expected accesses (`sub_expected`, or `sub_expected_eps`
    where `tables` (`RateSource.draw_tables`: starts, offsets, rates, ends, w_a,
    use_max, whi, several) holds several epochs), u_i the next double of rng's stream,
    drawn in the kernel as numpy's PCG64 `random()` draws it (`_pcg64_fill`) and the
    stream's state put back after: the same bits and the same stream as `rng.random`
    and `draw_below` by chunks, by blocks of DRAW_BLOCK pages held in the cache instead
    of two arrays of n doubles. False (nothing drawn) without numba or where rng's bit
    generator is not PCG64 (the caller draws by chunks)."""
    pcg = _pcg_take(rng)
    if pcg is None:
        return False
    n = pages.shape[0]
    if n == 0:
        return True
    b = min(DRAW_BLOCK, n)
    _kernel("draw_accessed")(out, pages, which, bool(by_page), w_tab, *tables, pcg[2],
                             pcg[3], np.empty(b), np.empty(b))
    _pcg_put(*pcg)
    return True


def lru_sweep(nodebits, node: int, start: int, limit: int, sel, sel_on: bool, passes,
              w_tab, tables, rng, flags, node_map, on: bool, active: int, setbits: int,
              keep: int, nr_active, sel_val: bool, cold_max: int):
    """A CLOCK hand's pass over `node`'s pages whose bit in the ACTIVE bitmap `sel` is
    sel_on, from `start` (`NodeBits.pages_on` with a hand's `passes`), each page's
    accessed bit since the hand last passed it drawn as `draw_accessed` draws it
    (w_tab: W of each pass time, `tables`: the epochs'), and `set_active` (the pages
    whose bit is sel_val) applied as it goes, by blocks of DRAW_BLOCK pages: `LRU.sweep`
    in one pass, without an array of the pages. Returns (hand position, addresses
    scanned, pages, pages whose bit is sel_val, the first cold_max others), or None
    without numba or PCG64 (the caller scans, draws and sets apart)."""
    pcg = _pcg_take(rng)
    if pcg is None:
        return None
    b = DRAW_BLOCK
    res = np.zeros(5, np.int64)
    cold = np.empty(max(int(cold_max), 0), np.int64)
    _kernel("lru_sweep")(nodebits.bits[node], nodebits.npages, int(start), int(limit), sel,
                         bool(sel_on), passes.bounds, passes.times, w_tab, *tables,
                         pcg[2], pcg[3], np.empty(b, np.int64), np.empty(b, np.int64),
                         np.empty(b), np.empty(b), np.empty(b, np.bool_), flags, node_map,
                         bool(on), np.uint8(active), np.uint8(setbits), np.uint8(keep),
                         nr_active, bool(sel_val), cold, res)
    _pcg_put(*pcg)
    return int(res[0]), int(res[1]), int(res[2]), int(res[3]), cold[:res[4]]


def mglru_age(nodebits, node: int, w_tab, tables, rng, gen, slots, rule, nonleaf: bool,
              pmd: int):
    """MGLRU's aging walk of `node` (`PteScan.age_node`) in one compiled pass over its
    bitmap row: each page's accessed bit drawn as `draw_accessed` draws it (with
    `tables`, `RateSource.draw_tables` of the walk's one start time; None: no page is
    young and rng is not drawn), and its generation byte updated by `rule` (fold,
    oldest, folded, node tag, young, arrived: `AutoNumaTieringMglru.age`) with its bit
    in `slots` (a `SlotBits` of the generations' seq % 4). Returns
    (pages, PTE checks), or None without numba or PCG64 (the caller walks apart)."""
    pcg = _pcg_take(rng)
    if pcg is None:
        return None
    b = DRAW_BLOCK
    res = np.zeros(2, np.int64)
    draw = tables is not None
    if not draw:
        w_tab, tables = np.zeros(1), _NO_DRAWS[1:9]
    fold, old, folded, tag, young, arrived = rule
    _kernel("mglru_age")(nodebits.bits[node], nodebits.npages, draw, w_tab, *tables,
                         pcg[2], pcg[3], np.empty(b, np.int64), np.zeros(b, np.int64),
                         np.empty(b), np.empty(b), np.zeros(b, np.bool_), gen,
                         slots.rows, bool(fold), np.uint8(old), np.uint8(folded),
                         np.uint8(tag), np.uint8(young), np.uint8(arrived), bool(nonleaf),
                         np.int64(pmd), res)
    _pcg_put(*pcg)
    return int(res[0]), int(res[1])


def page_dtype(npages: int):
    """Page numbers in 4 bytes while every page fits (5 TiB of 4 KiB pages do), else 8."""
    return np.int32 if int(npages) < 2**31 else np.int64


#: `LruLists.age_inactive`'s least mean run of the lists' pages (one list and index in
#: address order): a page drawn after one of another index ends a block of draws, a
#: call of some 30 arguments (at 8, about what listing and drawing apart cost a page)
RUN_MIN = 8


#: `_list_emit`'s draw arguments where it only lists (w_tab, starts, soff, rate, ends,
#: w_a, use_max, whi, multi, stream state, jump table): placeholders of their types
_NO_DRAWS = (np.zeros(1), np.zeros(1, np.int64), np.zeros(2, np.int64), np.zeros(1),
             np.zeros(1, np.int64), np.zeros(1), np.zeros(1, np.bool_), np.zeros(1), False,
             np.zeros(2, np.uint64), np.zeros((4, 4), np.uint64))


class LruLists:
    """The two LRU lists of one node (flags & mask == 0 or == mask), tail first: pages
    ordered by their insertion index (`inserted`, < ntimes), equal indexes by address,
    as `pages[np.argsort(inserted[pages], kind="stable")]` orders the node's pages in
    address order. A counting sort: one pass over the blocks holding the node's pages
    (`blocks`: its page count per `block` pages) counts both lists by index, one more
    emits the first pages of either or both; no per-page temporaries. Given `hist`
    (the counts, kept by the caller through every change since a count), the counting
    pass is skipped and `runs` is the caller's estimate of the stretches."""

    def __init__(self, node_map, node: int, blocks, block: int, flags, mask: int,
                 inserted, ntimes: int, hist=None, runs: int = 0):
        self.args = (node_map, np.uint8(node), np.ascontiguousarray(blocks), int(block),
                     flags, np.uint8(mask))
        self.mask, self.inserted = int(mask), inserted
        # page numbers in 4 bytes while they fit (5 TiB of 4 KiB pages do)
        self._pdt = page_dtype(node_map.shape[0])
        if hist is not None:  # the counts kept by the caller (at least ntimes indexes)
            self.hist, self.runs = hist, int(runs)
            return
        nruns = np.zeros(1, np.int64)
        #: each list's pages by insertion index (list 0: the mask clear)
        self.hist = _kernel("list_hist")(*self.args, inserted, int(ntimes), nruns)
        #: address-order stretches of the node's pages of one list and index
        self.runs = int(nruns[0])

    def lengths(self):
        """(inactive, active): the lists' lengths (the mask clear, set)."""
        return int(self.hist[0].sum()), int(self.hist[1].sum())

    def first(self, n_clear: int, n_set: int, track=None, scratch=None):
        """The first n_clear pages of the list with the mask clear and the first n_set
        of the one with it set, in one pass (int32 page numbers below 2^31 pages).
        Given `track` (an integer array over all pages), also min(track[pages]) of
        each list's pages from the same pass (the dtype's max if none). Given
        `scratch` (a `Scratch`), the pages are written into its two arrays, kept
        between calls, and the results are views of them, valid until its next use:
        a fresh array of a list's pages is a fresh mapping, faulted in a page at a
        time at every pass (Nimble at bench_memsim: 438 k of its 957 k page faults)."""
        use = track is not None
        tr = track if use else np.zeros(1, np.uint8)
        mins = np.full(2, np.iinfo(tr.dtype).max, tr.dtype)
        outs = (Scratch() if scratch is None else scratch).get((self._pdt, n_clear),
                                                               (self._pdt, n_set))
        self._emit(n_clear, n_set, *outs, tr, use, mins, False, 0, self.inserted,
                   outs[0], 0, *_NO_DRAWS, 1)
        return (outs, mins) if use else outs

    def _emit(self, n_clear, n_set, out0, out1, track, use_track, mins, draw, referenced,
              checked, up, t, w_tab, starts, soff, rate, ends, w_a, use_max, whi, multi,
              st, jump, nb):
        """`_list_emit` with its buffers (nb entries: DRAW_BLOCK where it draws)."""
        nt = self.hist.shape[1] if draw else 1
        got = _kernel("list_emit")(
            *self.args, self.inserted, self.hist,
            np.array([n_clear, n_set], dtype=np.int64), out0, out1, track, bool(use_track),
            mins, bool(draw), np.uint8(referenced), checked, up, int(t), w_tab, starts,
            soff, rate, ends, w_a, use_max, whi, bool(multi), st, jump,
            np.zeros(nt, np.uint64), np.zeros(nt, np.uint64), np.empty(nb, self._pdt),
            np.empty(nb), np.empty(nb), np.empty(nb, np.bool_))
        if got < 0:
            raise RuntimeError(f"LRU lists of node {int(self.args[1])}: their counts "
                               "promise more pages than the node holds")
        return got

    def age_inactive(self, n_clear: int, n_set: int, checked, referenced: int, t: int,
                     draws, rng, scratch=None):
        """Nimble's aging of the first n_clear pages of the list with the mask clear
        (`Nimble._age`) in one pass (`_list_emit`), as the listing (`first`), the
        draws of `AccessedBits.test_since_table` (`draws`: its `table_draws` for the
        check times `checked` indexes) and `nimble_inactive` would age them, with the
        same bits and rng's stream left where they leave it, but no array of the pages.
        Returns (the activated pages in address order, the first n_set pages of the
        list with the mask set), views of `scratch`'s arrays if given; None without
        numba, where rng's bit generator is not PCG64, or where the lists' runs are
        short (under RUN_MIN pages on average), and the caller ages apart."""
        if self.runs * RUN_MIN > int(self.hist.sum()):
            return None
        pcg = _pcg_take(rng)
        if pcg is None:
            return None
        up, out1 = (Scratch() if scratch is None else scratch).get((self._pdt, n_clear),
                                                                   (self._pdt, n_set))
        w_tab, tables = draws
        mins = np.zeros(2, np.uint8)
        nup = self._emit(n_clear, n_set, up, out1, mins, False, mins, True, referenced,
                         checked, up, t, w_tab, *tables, pcg[2], pcg[3], DRAW_BLOCK)
        _pcg_put(*pcg)
        return up[:nup], out1

    def list(self, on: bool, half: bool = False):
        """(pages, the list's length): the list with the mask set (`on`) or clear;
        with `half` only its older half (the first len // 2)."""
        total = self.lengths()[int(on)]
        m = total // 2 if half else total
        return self.first(0 if on else m, m if on else 0)[int(on)], total


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
    keep, dup = _kernel("first_seen")(pages, _seen)
    return pages[keep] if dup else pages


def cooled_bins(cnt, pclk, clock: int, max_shift: int, nbins: int) -> np.ndarray:
    """Pages per bin min(bit_length((cnt >> clip(clock - pclk, 0, max_shift)) + 1),
    nbins) (index 0 unused): MEMTIS's histogram of every 4 KiB page by its lazily
    cooled count, in one pass without temporaries."""
    return _kernel("cooled_bins")(cnt, pclk, np.int64(clock), np.int64(max_shift),
                                  int(nbins))


def split_bins(cnt, pclk, node, sp, hp: int, unalloc: int, clock: int, max_shift: int,
               nbins: int) -> np.ndarray:
    """MEMTIS's histogram of the allocated base pages of split huge pages `sp` by
    get_idx of their lazily cooled counts, in one pass (its numpy form listed the
    pages a chunk at a time, then gathered, halved and binned them)."""
    return _kernel("split_bins")(cnt, pclk, node, np.asarray(sp, dtype=np.int64),
                                 np.int64(hp), np.int64(node.shape[0]), np.uint8(unalloc),
                                 np.int64(clock), np.int64(max_shift), np.int64(nbins))


def set_counts(cnt, pclk, pages, new, clock: int, max_shift: int, nbins: int,
               ebins) -> None:
    """`cnt[pages] = new` (pages distinct) with `ebins`, the kept `cooled_bins` of
    every page (None: not kept), moved for each page whose bin changes: one pass where
    MEMTIS's sample path took `cooled_bins` of the pages before and after the write."""
    track = ebins is not None
    if not track:
        ebins = np.zeros(nbins + 1, np.int64)
    _kernel("set_counts")(cnt, pclk, np.asarray(pages, dtype=np.int64),
                          np.asarray(new, dtype=np.int64), np.int64(clock),
                          np.int64(max_shift), np.int64(nbins), ebins, track)


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
    k = _kernel("memtis_cool")
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


def move_pages(node_map, bits, blocks, used, pages, cur, dsts, block: int) -> None:
    """`Memory.move` in one pass: pages[i] (distinct) from cur[i] to dsts[i] in the page
    map, the node bitmaps (`bits`, or None), the pages per node and per block; the
    numpy form scattered, bit-moved and bincounted over every block the moves span."""
    use = bits is not None
    _kernel("move_pages")(node_map, bits if use else np.zeros((1, 1), np.uint64), use,
                          blocks, used, pages, cur, dsts, np.int64(block))


def set_active(flags, node_map, pages, on: bool, active: int, setbits: int, keep: int,
               nr_active, row, sel=None, sel_val: bool = True) -> int:
    """`LRU._set_active` in two passes without temporaries: the allocated pages whose
    flag & active differs from `on` (as read before the call) get (flag | setbits) &
    keep, their node's nr_active +-1 (a page listed twice counts twice, as numpy's
    bincount did) and their bit in `row` (or None). Given `sel`, only pages[sel ==
    sel_val] are considered (a hand's referenced or idle pages, without indexing them
    out first). Returns how many pages were considered."""
    use, use_sel = row is not None, sel is not None
    return int(_kernel("set_active")(flags, node_map, pages, bool(on), np.uint8(active),
                                     np.uint8(setbits), np.uint8(keep), nr_active,
                                     row if use else np.zeros(1, np.uint64), use,
                                     sel if use_sel else np.zeros(1, np.bool_), use_sel,
                                     bool(sel_val)))


def lru_mark(flags, pages, active: int, referenced: int, node_map, nr_active, row):
    """`LRU.mark_faulted` in one pass: which pages are active; of the others the
    referenced ones activated (as `set_active` activates them: the allocated ones, with
    their node's count in nr_active and their bit in `row`, or None) and the rest made
    referenced. The flag bit 0x80 (free) is borrowed during the call."""
    act = np.empty(pages.shape[0], np.bool_)
    use = row is not None
    _kernel("lru_mark")(flags, pages, np.uint8(active), np.uint8(referenced), np.uint8(0x80),
                        act, np.empty(pages.shape[0], np.int64), node_map, nr_active,
                        row if use else np.zeros(1, np.uint64), use)
    return act


def disjoint_ranges(starts, ends) -> bool:
    """Whether the ranges [starts[i], ends[i]) are non-empty and pairwise disjoint (so
    their pages, listed range by range, are distinct)."""
    if starts.shape[0] == 0:
        return True
    if not bool(np.all(ends > starts)):
        return False
    order = np.argsort(starts, kind="stable")
    return bool(np.all(ends[order[:-1]] <= starts[order[1:]]))


def range_movable(node_map, starts, ends, dst: int):
    """`Simulation._movable(range_pages(starts, ends), dst)` for disjoint ranges
    (`disjoint_ranges`) in one pass over their pages: (pages, nodes) of the allocated
    pages not on dst, range by range, without the page list, its repeat and the
    dedup pass (IDT moves whole regions: 847 M pages in bench_memsim at 10x)."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    total = int((ends - starts).sum()) if starts.shape[0] else 0
    pages, cur, n = _kernel("range_movable")(node_map, starts, ends, int(dst), total)
    if 2 * n < total:  # do not keep the whole buffer alive for a few pages
        return pages[:n].copy(), cur[:n].copy()
    return pages[:n], cur[:n]


def relocate_ranges(mem_node, bits, blocks, used, block: int, flags, mask: int, nr,
                    starts, ends, dst: int, room: int, field, rank, epoch, stamp: int):
    """`Simulation.migrate(range_pages(starts, ends), dst)` for disjoint ranges
    (`disjoint_ranges`) up to `room` pages, in one pass over the ranges: the page map,
    node bitmaps (`bits` or None), per-node and per-block counts (`move_pages`), the
    active counts `nr` of pages with flags & mask (`move_counts`) and `relocate_sums`'
    sums, counts, promotions, ping-pongs and stamps, page by page in the same order.
    Returns (moved, sums, counts, promotions, ping-pongs)."""
    sums = np.zeros((4, 256))
    counts = np.zeros((2, 256), np.int64)
    use = bits is not None
    n, npro, pp = _kernel("relocate_ranges")(
        mem_node, bits if use else np.zeros((1, 1), np.uint64), use, blocks, used,
        np.int64(block), flags, np.uint8(mask), nr, np.asarray(starts, dtype=np.int64),
        np.asarray(ends, dtype=np.int64), np.uint8(dst), np.int64(room), field.starts,
        field.ends, field.read, field.write, rank, epoch, np.int64(stamp), sums, counts)
    return int(n), sums, counts, int(npro), int(pp)


def sample_account(a, b, count, h, word: int, bit: int, push: bool) -> np.ndarray:
    """One IDT sampling interval (`IdtRegions.on_sample`) in one pass: acc = a | b
    (either page of a region accessed), count += acc in place and, with `push`, acc
    written in place as bit `bit` of word `word` of every ring buffer h ((R, words)
    uint64); returns acc."""
    return _kernel("sample_account")(np.asarray(a, np.bool_), np.asarray(b, np.bool_),
                                     count, h, int(word), int(bit), bool(push))


def draw_pairs(rng, s, e) -> np.ndarray:
    """Two uniform pages of each region [s[i], e[i]) (DAMON's damon_rand, twice), as
    `min(s + (rng.random((2, R)) * (e - s)).astype(int64), e - 1)` flattened: the same
    draws and operations, the arithmetic in one pass (a Generator passed to numba
    costs ~15 us a call in typing, more than the pass)."""
    out = np.empty(2 * s.shape[0], np.int64)
    _kernel("draw_pairs")(rng.random(2 * s.shape[0]), s, e, out)
    return out


def slow_hits(acc, start, end, node_map, top: int, by, dec, only_demoted: bool, keys,
              room: int):
    """IDT's slow-tier hits of one sampling interval in one pass: (j, pages, sums,
    nfit) for the regions j accessed (`acc`) whose middle page m = (start + end - 1)
    // 2 is allocated off `top` (with `only_demoted`, only those with by[m] > 0: IDT
    demoted them); `pages`, their pages in all; sums[k], the pages of those whose
    by[m], dec[m] name the awaiting decision keys[k] = (by - 1) * 256 + dec; nfit, how
    many of j come before the first larger than `room` pages."""
    j, total, sums, nfit = _kernel("slow_hits")(
        acc, start, end, node_map, np.uint8(top), by, dec, bool(only_demoted),
        np.asarray(keys, dtype=np.int64), np.int64(room))
    return j, int(total), sums, int(nfit)


def bisect_throughput(a, b, c, compute_ns: float, mlp: float, threads: float,
                      x_cap: float) -> float:
    """The closed loop's throughput (`engine.throughput.solve_throughput`): the same
    bisection, float operation for float operation, compiled (it runs at every engine
    step: 32 evaluations of the loaded stall each)."""
    return float(_kernel("bisect_throughput")(a, b, c, compute_ns, mlp, threads, x_cap))


def range_node_counts(node_map, starts, ends, nnodes: int) -> np.ndarray:
    """`field.range_node_counts` in one pass over the ranges' pages (its numpy form
    gathered each batch's addresses, their range indexes and a bincount)."""
    return _kernel("range_node_counts")(node_map, np.asarray(starts, dtype=np.int64),
                                        np.asarray(ends, dtype=np.int64), int(nnodes))


def pages_not_on(node_map, blocks, starts, ends, nodes, block: int):
    """`Memory.pages_not_on` in two passes (count, then fill arrays of that size),
    without expanding blocks into address arrays (the oracle on the redis trace: 54% of
    its CPU was that expansion) and without a buffer larger than the result."""
    k = _kernel("pages_not_on")
    none = np.zeros(0, np.int64)
    n = k(node_map, blocks, starts, ends, nodes, np.int64(block), none, none, False)
    pages, of = np.empty(n, np.int64), np.empty(n, np.int64)
    k(node_map, blocks, starts, ends, nodes, np.int64(block), pages, of, True)
    return pages, of


def pages_by_byte(node_map, blocks, block: int, node: int, byte, lut,
                  buf=None) -> np.ndarray:
    """The pages on `node`, ordered by lut[byte[page]] (uint8), equal keys in address
    order: what `np.argsort(lut[byte[p]], kind="stable")` gives over
    `np.flatnonzero(node_map == node)`, in two passes over the blocks holding the
    node's pages (`blocks`: pages per node per `block` addresses), skipping the
    map's 8-byte words without the node's byte. Pages in 4 bytes while every page
    fits (8 beyond 2^31 pages). Written into `buf` (returned as its prefix) when it
    is large enough and of that type: a caller that refreshes such a list often saves
    the page faults of a fresh array each time."""
    total = int(blocks[:, node].sum())
    pdt = page_dtype(node_map.shape[0])
    if buf is None or buf.shape[0] < total or buf.dtype != pdt:
        buf = np.empty(total, pdt)
    out = buf[:total]
    if block % 8:
        raise ValueError(f"pages_by_byte: block {block} is not a multiple of 8")
    words = node_map[: node_map.shape[0] // 8 * 8].view(np.uint64)
    seen = _kernel("pages_by_byte")(node_map, words, blocks, np.int64(block), np.int64(node),
                                    byte, np.ascontiguousarray(lut, dtype=np.uint8), out)
    if seen != total:
        raise RuntimeError(f"pages_by_byte: the page map holds {seen} pages of node "
                           f"{node}, its block counts {total}")
    return out


def spend_budgets(rate, dw, rem):
    """One epoch of a lazy first-access search in one pass (what
    `hit = flatnonzero(rate * dw >= rem)`, `hit = hit[rate[hit] > 0]`, then
    `rem[hit] = inf; rem -= rate * dw` computed; `dw` one work or one per page):
    returns (hit, their budgets before the epoch); `rem` (float64) is updated in
    place."""
    dw = np.ascontiguousarray(dw, dtype=np.float64).reshape(-1)
    if dw.shape[0] not in (1, rate.shape[0]):
        raise ValueError(f"spend_budgets: {dw.shape[0]} works for {rate.shape[0]} pages")
    return _kernel("spend_budgets")(np.ascontiguousarray(rate, dtype=np.float64), dw, rem)


def halve_at(reads, writes, clk, hps, clock: int, max_shift: int):
    """HeMem's lazy cooling of `hps` in one pass (int64 arrays, updated in place):
    returns the cooled (reads, writes), as `hemem.halve` of each, written back."""
    return _kernel("halve_at")(reads, writes, clk, np.asarray(hps, dtype=np.int64),
                               np.int64(clock), np.int64(max_shift))


class TierShares:
    """Colloid-on-HeMem's view of every tracked page (`__call__`), with its arrays kept
    between calls: its 48,500 calls at bench_scale would map and fault 0.9 MB of fresh
    arrays each."""

    #: counts below this are sorted by counting (HeMem's are a few dozen at most)
    COUNTS = 1024

    def __init__(self):
        self._buf = Scratch()
        self._hist = (np.empty(self.COUNTS, np.int64), np.empty(self.COUNTS, np.int64))

    def __call__(self, tier, reads, writes, clk, clock: int, max_shift: int, none: int,
                 src_tier: int, dst_tier: int, zero_partners: bool = True):
        """Every page with tier != none cooled in place (`halve_at`), then (total
        count, sources, their shares, the sources' order, partners, their shares): the
        sources are the pages of src_tier of positive count, in index order, with
        src_up their indexes in ascending share; the partners are the pages of
        dst_tier (of positive count unless `zero_partners`) in ascending share, equal
        shares in index order: np.argsort(kind="stable") of the shares, by a counting
        sort over the integer counts, whose order count / total keeps (Colloid's pairs
        sorted both, 0.43 of their 0.55 ms a call at bench_scale; numpy's sort when a
        count reaches `COUNTS`). Shares are what numpy's float sum and division give
        (integer counts: the sum is exact below 2^53); zeros where the total is 0. The
        arrays returned are views of this object's, valid until its next call."""
        n = tier.shape[0]
        buf = self._buf.get(*((dt, n) for dt in (np.int64, np.int64, np.int64, np.int64,
                                                 np.float64, np.float64, np.int64,
                                                 np.int64)))
        src, cs, dst, cd, p_src, p_dst, src_up, dst_up = buf
        total, ns, nd, counted = _kernel("tier_shares")(
            tier, reads, writes, clk, np.int64(clock), np.int64(max_shift),
            np.uint8(none), np.uint8(src_tier), np.uint8(dst_tier), bool(zero_partners),
            *buf, *self._hist)
        src, p_src, dst, p_dst = src[:ns], p_src[:ns], dst[:nd], p_dst[:nd]
        if counted:
            return int(total), src, p_src, src_up[:ns], dst, p_dst
        # a count past the table: the partners' pages and counts were left in src_up
        # and dst_up, in index order
        o = np.argsort(dst_up[:nd], kind="stable")
        dst[:] = src_up[:nd][o]
        p_dst[:] = dst_up[:nd][o] / (float(total) if total > 0 else 1.0)
        return int(total), src, p_src, np.argsort(cs[:ns], kind="stable"), dst, p_dst


def pick_pairs(p_src, vals, partner, free_slots: int, dp: float, most: int,
               src_up=None):
    """Colloid's pair rule over sources `p_src` and the unused partners' shares `vals`
    (ascending, each with its index `partner`): (source indexes, partner indexes or -1
    for a free frame), in pairing order (`policies.colloid.pick_pairs`). `src_up`: the
    sources of positive share in ascending share, if the caller has them (no partner
    share may then be negative)."""
    p_src = np.ascontiguousarray(p_src, dtype=np.float64)
    most = max(min(int(most), p_src.shape[0]), 0)
    out_i, out_j = np.empty(most, np.int64), np.empty(most, np.int64)
    vals = np.ascontiguousarray(vals, dtype=np.float64)
    # any order of ascending share would do (equal differences go to the lowest index
    # whatever the walk's order); numpy's stable sort was the fastest on HeMem's shares.
    # Without a negative partner share only sources of positive share can pair (p - v
    # > 0, or a free frame for p > 0), and the partner pointer's stops for the others
    # do not move it: the walk skips them (bench_memsim's colloid-hemem: 276 of 241,000
    # sources a call)
    if src_up is None:
        src = np.flatnonzero(p_src > 0) if vals.shape[0] == 0 or vals[0] >= 0 \
            else np.arange(p_src.shape[0])
        src_up = src[np.argsort(p_src[src], kind="stable")]
    elif vals.shape[0] and vals[0] < 0:
        raise ValueError("pick_pairs: src_up holds only positive shares, but a partner's "
                         "share is negative")
    k = _kernel("pick_pairs")(p_src, src_up, vals,
                              np.ascontiguousarray(partner, dtype=np.int64), int(free_slots),
                              float(dp), most, out_i, out_j)
    return out_i[:k], out_j[:k]


def sorted_find(keys, q):
    """(pos, hit) of ascending queries q in ascending unique keys: pos =
    searchsorted(keys, q), hit where keys[pos] == q, by one galloping walk (an
    AccessedBits level's lookup of a young filter's 45,000 pages in runs of 100,000)."""
    pos = np.empty(q.shape[0], np.int64)
    hit = np.empty(q.shape[0], np.bool_)
    _kernel("sorted_find")(keys, q, pos, hit)
    return pos, hit


def fill_ranges(arr, starts, ends, value) -> None:
    """arr[range_pages(starts, ends)] = value, without the page list."""
    _kernel("fill_ranges")(arr, np.asarray(starts, dtype=np.int64),
                           np.asarray(ends, dtype=np.int64), arr.dtype.type(value))


def move_counts(flags, mask: int, pages, cur, dsts, nr) -> None:
    """nr[cur[i]] -= 1, nr[dsts[i]] += 1 for the moved pages with flags & mask (the
    LRU's active counts follow a migration)."""
    _kernel("move_counts")(flags, np.uint8(mask), pages, cur, dsts, nr)


def list_counts(hist, kept, pages, node_map, flags, mask: int, inserted, sign: int) -> None:
    """Kept LRU list counts (`LruLists.hist` of each node, as hist[node]) less (sign -1)
    or plus (+1) `pages` at their places (node, list: flags & mask set, insertion
    index), on the nodes where `kept` is set: the counts follow pages that move or
    are re-inserted without a count of every page."""
    _kernel("list_counts")(np.asarray(pages, dtype=np.int64), node_map, flags,
                           np.uint8(mask), inserted, hist, kept, np.int64(sign))


def relocate_sums(pages, cur, dsts, field, rank, epoch, stamp: int):
    """The per-page part of `Simulation._relocate` in one pass: returns (sums, counts,
    promotions, ping-pongs) with sums[0..3] the moved pages' read rates by destination
    and by source node and their write rates likewise (np.bincount's order, so the
    same bits), counts[0], counts[1] the pages by source and by destination; sets the
    demoted pages' stamps in `epoch`."""
    sums = np.zeros((4, 256))
    counts = np.zeros((2, 256), np.int64)
    npro, pp = _kernel("relocate_sums")(pages, cur, dsts, field.starts, field.ends,
                                        field.read, field.write, rank, epoch,
                                        np.int64(stamp), sums, counts)
    return sums, counts, int(npro), int(pp)


def table_min(pages, which, by_page: bool, tab) -> float:
    """min(tab[which]) (`by_page`: min(tab[which[pages]])) without the gathers; inf if
    there are no pages."""
    return float(_kernel("table_min")(pages, which, bool(by_page),
                                      np.asarray(tab, dtype=np.float64)))


def nimble_inactive(scan, ref, flags, inserted, checked, now: int, active: int,
                    referenced: int) -> np.ndarray:
    """Nimble's inactive-list pass over `scan` after page_referenced gave `ref`:
    referenced twice -> active (PG_referenced kept), referenced once -> PG_referenced,
    else cleared; insertion and check indexes -> now. Returns which were activated."""
    return _kernel("nimble_inactive")(scan, ref, flags, inserted, checked,
                                      inserted.dtype.type(now), np.uint8(active),
                                      np.uint8(referenced))


def nimble_active(dscan, flags, inserted, checked, now: int, clear: int) -> None:
    """Nimble's active-list pass: every page of `dscan` deactivated (flags & ~clear,
    PG_referenced as it was), insertion and check indexes -> now."""
    _kernel("nimble_active")(dscan, flags, inserted, checked, inserted.dtype.type(now),
                             np.uint8(clear))


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


#: entries a calendar's roll places at a time (64 Ki entries, 1 MiB; at least a block)
ROLL_PIECE = 1 << 16


def scan_arm(node, start: int, end: int, skip, flag, unalloc: int, out):
    """The pages of [start, end) a NUMA scan step makes PROT_NONE, in one pass: those
    allocated (counted: the PTEs walked), on a node not in `skip` (indexed by node,
    `unalloc` included) and not armed yet (their bit clear in `flag`, a `PageBits`'
    words); they are flagged armed and written to `out` in address order. Returns
    (walked, how many were written)."""
    w, k = _kernel("scan_arm")(node, int(start), int(end), skip, flag, np.uint8(unalloc), out)
    return int(w), int(k)


class FaultCalendar:
    """Scheduled hint faults past the current bucket, unsorted: a calendar queue (R.
    Brown, CACM 1988) of `nbuckets` buckets of fault work over a window [base, top),
    whose windows grow geometrically as a ladder queue's rungs do, plus one bucket for
    the works past `top`. An entry is (fault work, page, arm index), 12 bytes, since the
    pool holds nearly every page at once when the scan covers memory faster than it is
    touched (issue 18's target 3):
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
        q = _kernel("cal_push")(budget, r, float(w0), pages, arm, self.base, self.scale,
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
            _kernel("cal_pop")(int(j), self.nb, self.bsz, *self._state(), ow, op, oa)
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
            q = _kernel("cal_rebucket")(
                self.nb, self.base, self.scale, float(self.cur + 1), self.nb, self.bsz,
                *self._state(), bw, bp, ba, ow, op, oa)
        return ow[:q].copy(), op[:q].copy(), oa[:q].copy()


class NodeBits:
    """One bit per page and node: page p is on node r iff bit p of row r is set (the
    page map as `k` bitmaps, k/8 bytes per page), kept through every placement, free
    and move (`move_pages`), so a CLOCK hand over one node's pages reads 64 addresses
    per word and stops only at that node's pages (`pages_on`)."""

    def __init__(self, node_map, k: int):
        self.npages = node_map.shape[0]
        self.bits = _kernel("bits_build")(node_map, np.uint8(k))

    def fill(self, start: int, end: int, node: int) -> None:
        _kernel("bits_range")(self.bits, int(node), int(start), int(end), True)

    def clear(self, start: int, end: int) -> None:
        """Pages [start, end) on no node."""
        _kernel("bits_range")(self.bits, -1, int(start), int(end), False)

    def pages_on(self, node: int, start: int, limit: int, flags=None, mask: int = 0,
                 value: int = 0, sel=None, sel_on: bool = True, passes=None):
        """`Memory.pages_on`: up to `limit` pages on `node` (with flags & mask ==
        value, given flags; with their bit in the bitmap `sel` set, or clear if not
        `sel_on`, given sel) from address `start`, wrapping, by windows that start near
        the need and double; returns (pages, next hand position, addresses scanned).
        Given `passes` (a `PassTimes`), also (`passes.index(pages)`, the least of those
        pass times) from the same pass: a hand's pass-time intervals without a second
        walk over its pages."""
        use, use_sel = flags is not None, sel is not None
        f = flags if use else np.zeros(1, np.uint8)
        b = sel if use_sel else np.zeros(1, np.uint64)
        use_b = passes is not None
        bounds = passes.bounds if use_b else np.zeros(2, np.int64)
        times = passes.times if use_b else np.zeros(1)
        pages, pos, scanned, which, tmin = _kernel("pages_on_bits")(
            self.bits[node], self.npages, int(start), int(limit), f, np.uint8(mask),
            np.uint8(value), use, b, bool(sel_on), use_sel, bounds, times, use_b)
        if use_b:
            return pages, pos, scanned, (which, float(tmin))
        return pages, pos, scanned


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
        _kernel("bits_set")(self.words, np.asarray(pages, dtype=np.int64), bool(value))

    def get(self, pages) -> np.ndarray:
        """Each page's bit, as bools."""
        pages = np.asarray(pages, dtype=np.int64)
        out = np.empty(pages.shape[0], np.bool_)
        _kernel("bits_get")(self.words, pages, out)
        return out

    def any(self, start: int, end: int) -> bool:
        """Whether a page of [start, end) has its bit set."""
        return bool(_kernel("bits_any")(self.words, int(start), int(end)))

    def clear(self, start: int, end: int) -> None:
        _kernel("bits_range")(self.words.reshape(1, -1), 0, int(start), int(end), False)


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
        _kernel("pmap_put")(self.keys, self.vals, k, v)

    def put(self, pages, vals) -> None:
        """pages (distinct, none in the map) -> vals."""
        pages = np.asarray(pages, dtype=self.pdt)
        self._grow(self.n + pages.shape[0])
        _kernel("pmap_put")(self.keys, self.vals, pages, np.asarray(vals, dtype=self.vdt))
        self.n += pages.shape[0]

    def get(self, pages) -> np.ndarray:
        """Each page's value, -1 where absent (int64)."""
        pages = np.asarray(pages, dtype=self.pdt)
        out = np.empty(pages.shape[0], np.int64)
        _kernel("pmap_get")(self.keys, self.vals, pages, out)
        return out

    def pop(self, pages) -> np.ndarray:
        """`get`, and the pages found taken out of the map (a page listed twice is
        found at its first listing only)."""
        pages = np.asarray(pages, dtype=self.pdt)
        out = np.empty(pages.shape[0], np.int64)
        self.n -= int(_kernel("pmap_pop")(self.keys, self.vals, pages, out))
        return out

    def remap(self, new) -> None:
        """Every value v becomes new[v]."""
        _kernel("pmap_remap")(self.keys, self.vals, np.asarray(new, dtype=self.vdt))


class SlotBits:
    """One bitmap per value of a small per-page field (MGLRU's generations, seq % 4):
    bit p of row s set iff page p's field holds slot s, so that a hand over one slot's
    pages reads 64 addresses a word (`NodeBits.pages_on`'s `sel`), nslots/8 bytes a
    page. The owner of the field moves the bits with every write to it."""

    def __init__(self, npages: int, nslots: int):
        self.rows = np.zeros((int(nslots), -(-int(npages) // 64)), np.uint64)

    def fill(self, start: int, end: int, slot) -> None:
        """Pages [start, end) in `slot` (None: in none)."""
        _kernel("bits_range")(self.rows, -1, int(start), int(end), False)
        if slot is not None:
            _kernel("bits_range")(self.rows, int(slot), int(start), int(end), True)

    def move(self, pages, old, new) -> None:
        """`pages` from slot `old` to slot `new` (either None: none)."""
        pages = np.asarray(pages, dtype=np.int64)
        if old is not None:
            _kernel("bits_set")(self.rows[int(old)], pages, False)
        if new is not None:
            _kernel("bits_set")(self.rows[int(new)], pages, True)

    def slot_of(self) -> np.ndarray:
        """Every page's slot (-1: none), unpacked from the rows (for checks)."""
        n = self.rows.shape[1] * 64
        out = np.full(n, -1, np.int64)
        for s in range(self.rows.shape[0]):
            on = np.unpackbits(self.rows[s].view(np.uint8), bitorder="little").astype(bool)
            out[on] = s
        return out


def poll_faults(pages, works, arm, arm_t, ta, wa, lo: int, now: float, flag):
    """A hint-fault poll's output in one pass (`ScheduledHintFaults.poll`): each fault's
    time from its work (the timeline's time_at_work over breakpoints ta, wa; the search
    starts at breakpoint `lo` for works above it), raised to its arm time and capped at
    `now`; then (pages, times, latency) ordered by time, equal times in input order
    (the stable sort, by merging the input's sorted runs: the batches' prefixes), and
    the pages' armed bits cleared in `flag` (a `PageBits`' words). None where a time is
    NaN (the caller sorts)."""
    if works.shape[0] == 0:
        return None
    p, t, lat, ok = _kernel("poll_faults")(pages, works, arm, arm_t, ta, wa, int(lo),
                                           float(now), flag)
    return (p, t, lat) if ok else None


def merge_sorted(w1, p1, a1, w2, p2, a2):
    """Stable merge of two sorted batches (keys w, payloads p and a)."""
    if w1.shape[0] == 0 or w2.shape[0] == 0 or w1[-1] <= w2[0]:
        return (np.concatenate((w1, w2)), np.concatenate((p1, p2)),
                np.concatenate((a1, a2)))
    return _kernel("merge_sorted")(w1, p1, a1, w2, p2, a2)
