"""The rate model's accessed-bit draws, compiled: a page's expected accesses since
its bit was cleared (the field's rate times the work done since), and the draw of the
bit against 1 - exp(-expected), for many pages whose clear times are few values (one
sample time for DAMON and IDT, a CLOCK hand's pass times, Nimble's check times).
`RateSource.accessed_table` and the compiled LRU and MGLRU passes call them; the draws
come from the generator's PCG64 stream in the kernel (`pcg64`), the same bits as
numpy's `random()` by chunks."""
from __future__ import annotations

import math

import numpy as np

from ..jit import helper, kernel, numba_jit
from ..pcg64 import _pcg64_fill, _pcg_put, _pcg_take
from ..structures import _upper_near, argsort_untied


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


_sub_expected_kernel = kernel(_sub_expected)  # the helper, also a kernel of its own


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


_sub_expected_eps_kernel = kernel(_sub_expected_eps)  # the helper, also a kernel of its own


def _draw_below_numpy(u, lam, out):
    np.less(u, -np.expm1(lam), out=out)
    return u.shape[0]


@kernel(numpy=_draw_below_numpy)
def _draw_below(u, lam, out):
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


@kernel
def _draw_accessed(out, pages, which, by_page, w_tab, starts, soff, rate, ends, w_a,
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


@kernel
def _table_min(pages, which, by_page, tab):
    m = np.inf
    for i in range(pages.shape[0]):
        x = tab[which[pages[i]] if by_page else which[i]]
        if x < m:
            m = x
    return m


@kernel
def _times_sorted(ws, ta, wa, out):
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


@kernel
def _spend_budgets(rate, dw, rem):
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


#: pages per block of `draw_accessed`'s expected accesses (within the L1 cache)
DRAW_BLOCK = 1024


#: `_list_emit`'s draw arguments where it only lists (w_tab, starts, soff, rate, ends,
#: w_a, use_max, whi, multi, stream state, jump table): placeholders of their types
_NO_DRAWS = (np.zeros(1), np.zeros(1, np.int64), np.zeros(2, np.int64), np.zeros(1),
             np.zeros(1, np.int64), np.zeros(1), np.zeros(1, np.bool_), np.zeros(1), False,
             np.zeros(2, np.uint64), np.zeros((4, 4), np.uint64))


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
    the previous page's (pages come in runs of addresses from the hands and lists),
    by galloping from it when they ascend (IDT's sampled pages)."""
    _sub_expected_kernel(lam, pages, which, bool(by_page), w_tab, starts, rate, ends,
                         float(w_a), bool(use_max), float(whi), bool(init))


def sub_expected_eps(lam, pages, which, by_page: bool, w_tab, cat, w_a, use_max,
                     whi) -> None:
    """`sub_expected` for every epoch of a table lookup in one pass over the pages:
    lam[i] = 0 - (epoch 0's expected accesses) - (epoch 1's) ..., in that order, so the
    same bits as one `sub_expected` per epoch. `cat`: the epochs' (starts, offsets,
    rates, ends) concatenated (`RateSource._concat`); w_a, use_max, whi per epoch."""
    starts, soff, rate, ends = cat
    _sub_expected_eps_kernel(lam, pages, which, bool(by_page), w_tab, starts, soff,
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
    i = int(_draw_below(u, lam, out))
    if i < n:
        np.less(u[i:], -np.expm1(lam[i:]), out=out[i:])


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
    _draw_accessed(out, pages, which, bool(by_page), w_tab, *tables, pcg[2],
                   pcg[3], np.empty(b), np.empty(b))
    _pcg_put(*pcg)
    return True


def table_min(pages, which, by_page: bool, tab) -> float:
    """min(tab[which]) (`by_page`: min(tab[which[pages]])) without the gathers; inf if
    there are no pages."""
    return float(_table_min(pages, which, bool(by_page),
                            np.asarray(tab, dtype=np.float64)))


def by_time(works, ta, wa):
    """(order, times): the stable order of `Timeline.time_at_work(works)` (over
    breakpoints ta, wa) and the times in it, where those times strictly ascend along
    the works' own order (W is increasing, so they nearly always do): the works sorted
    (`argsort_untied`) and their times by one walk over the breakpoints, instead of a
    search per work and a sort of the times (PEBS's samples); None otherwise, and
    without numba."""
    if not numba_jit() or wa.shape[0] < 2:
        return None
    order, ws = argsort_untied(works)
    out = np.empty(ws.shape[0])
    if not _times_sorted(ws, np.ascontiguousarray(ta, dtype=np.float64),
                         np.ascontiguousarray(wa, dtype=np.float64), out):
        return None
    return order, out


def spend_budgets(rate, dw, rem):
    """One epoch of a lazy first-access search in one pass (what
    `hit = flatnonzero(rate * dw >= rem)`, `hit = hit[rate[hit] > 0]`, then
    `rem[hit] = inf; rem -= rate * dw` computed; `dw` one work or one per page):
    returns (hit, their budgets before the epoch); `rem` (float64) is updated in
    place."""
    dw = np.ascontiguousarray(dw, dtype=np.float64).reshape(-1)
    if dw.shape[0] not in (1, rate.shape[0]):
        raise ValueError(f"spend_budgets: {dw.shape[0]} works for {rate.shape[0]} pages")
    return _spend_budgets(np.ascontiguousarray(rate, dtype=np.float64), dw, rem)
