"""Unit tests of the access sources and monitor primitives (accessed bits, PEBS, hint
faults). The model-vs-replay agreement lives in test_model_vs_replay.py."""
from __future__ import annotations

import time

import numpy as np
import pytest

from tierlab.engine.timeline import Timeline
from tierlab.field import RateField
from tierlab.monitors import (AccessedBits, ExactSource, HintFaults, LEVEL_SPAN,
                              PTE_CHECK_SECONDS, PebsSampler, RateSource, draws,
                              poisson_events, source as source_mod)
from tierlab import jit, pcg64
from tierlab.structures import merge_sorted

Z_MAX = 4.5


def simple_timeline():
    """Hot [0, 64), warm [64, 576), zero [576, 1024), cold [1024, 2048); work 1000/s on
    [0, 1], stall on (1, 2], 2000/s on (2, 4]; the field changes at t = 3."""
    f1 = RateField([0, 64, 1024], [64, 576, 2048], [2e-3, 2e-4, 1e-5], [1e-3, 0.0, 0.0],
                   2048)
    f2 = RateField([0, 64], [64, 576], [1e-4, 1e-3], [0.0, 1e-4], 2048)
    tl = Timeline(f1)
    tl.advance(1.0, 1000.0)
    tl.advance(2.0, 1000.0)
    tl.advance(3.0, 3000.0)
    tl.set_field(3.0, f2)
    tl.advance(4.0, 5000.0)
    return tl


def small_log():
    times = [0.1, 0.2, 0.35, 0.5, 0.9]
    pages = [3, 3, 7, 600, 3]
    writes = [False, True, False, False, True]
    return ExactSource(times, pages, writes, npages=1024)


# -----------------------------------------------------------------------------------
# ExactSource on a hand-made log
# -----------------------------------------------------------------------------------
def test_exact_accessed_and_counts():
    ex = small_log()
    a = np.array([0, 3, 4, 512])
    b = np.array([1, 4, 8, 1024])
    assert ex.accessed(a, b, 0.0, 0.3).tolist() == [False, True, False, False]
    # per-entry t0; (t0, t1] is open at t0 and closed at t1
    got = ex.accessed(a, b, np.array([0.0, 0.2, 0.3, 0.4]), 0.5)
    assert got.tolist() == [False, False, True, True]
    r, w = ex.counts(a, b, 0.0, 1.0)
    assert r.tolist() == [0, 1, 1, 1] and w.tolist() == [0, 2, 0, 0]
    r, w = ex.counts(a, b, np.array([0.0, 0.15, 0.0, 0.5]), 1.0)
    assert r.tolist() == [0, 0, 1, 0] and w.tolist() == [0, 2, 0, 0]
    assert ex.accessed(a[:0], b[:0], 0.0, 1.0).shape == (0,)


def test_exact_first_access_and_samples():
    ex = small_log()
    rng = np.random.default_rng(0)
    fa = ex.first_access(np.array([3, 7, 600, 5]), 0.15, 1.0, rng)
    assert fa[:3].tolist() == [0.2, 0.35, 0.5] and np.isnan(fa[3])
    fa = ex.first_access(np.array([3, 7, 600, 5]), np.array([0.2, 0.0, 0.0, 0.0]), 0.3, rng)
    assert np.isnan(fa[0]) and np.isnan(fa[1]) and np.isnan(fa[2])
    fa = ex.first_access(np.array([3, 3]), np.array([0.0, 0.5]), 1.0, rng)
    assert fa.tolist() == [0.1, 0.9]
    p, t = ex.samples(0.0, 1.0, 1, "all", rng)
    assert p.tolist() == [3, 3, 7, 600, 3] and t.tolist() == [0.1, 0.2, 0.35, 0.5, 0.9]
    p, t = ex.samples(0.0, 1.0, 1, "write", rng)
    assert p.tolist() == [3, 3]
    p, t = ex.samples(0.0, 1.0, 1, "read", rng, select=lambda q: q > 5)
    assert p.tolist() == [7, 600]
    for _ in range(10):  # every 2nd event with a random phase: 2 or 3 of 5
        assert len(ex.samples(0.0, 1.0, 2, "all", rng)[0]) in (2, 3)
    with pytest.raises(ValueError):
        ex.samples(0.0, 1.0, 1, "loads", rng)


def test_exact_source_sorts_unsorted_log():
    ex = ExactSource([0.5, 0.1], [2, 1], [False, True])
    assert ex.times.tolist() == [0.1, 0.5] and ex.pages.tolist() == [1, 2]
    assert ex.npages == 3


# -----------------------------------------------------------------------------------
# RateSource
# -----------------------------------------------------------------------------------
def test_rate_expected_matches_timeline():
    tl = simple_timeline()
    rs = RateSource(tl)
    rng = np.random.default_rng(1)
    a = rng.integers(0, 2200, 3000)
    b = a + rng.integers(0, 900, 3000)
    t0 = rng.uniform(0, 4.5, 3000)
    for bb in (b, a + 1, a):
        r1, w1 = tl.expected(a, bb, t0, 3.6)
        r2, w2 = rs.expected(a, bb, t0, 3.6)
        np.testing.assert_allclose(r2, r1, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(w2, w1, rtol=1e-9, atol=1e-9)
    r1, w1 = tl.expected(a, b, 0.7, 3.2)
    r2, w2 = rs.expected(a, b, 0.7, 3.2)
    np.testing.assert_allclose(r2, r1, rtol=1e-9, atol=1e-9)


def test_stall_has_no_accesses():
    tl = simple_timeline()
    rs = RateSource(tl)
    rng = np.random.default_rng(2)
    a = np.arange(0, 2048, 8)
    assert not rs.accessed(a, a + 8, 1.0, 2.0, rng).any()
    r, w = rs.counts(a, a + 8, 1.0, 2.0, rng)
    assert r.sum() == 0 and w.sum() == 0
    p, t = rs.samples(0.0, 4.0, 10, "all", rng)
    assert len(p) > 100 and not np.any((t > 1.0) & (t <= 2.0))
    assert np.all(np.diff(t) >= 0)
    fa = rs.first_access(np.arange(64), 0.999, 4.0, rng)
    assert not np.any((fa > 1.0) & (fa <= 2.0))


def test_poisson_events_counts_and_limit():
    f = RateField([0, 100], [100, 300], [0.5, 0.1], [0.2, 0.0], 300)
    rng = np.random.default_rng(3)
    times, pages, writes = poisson_events(f, 0.0, 100.0, rng)  # W(t) = t
    assert np.all(np.diff(times) >= 0) and np.all((times > 0) & (times <= 100))
    n_r = np.sum(~writes & (pages < 100))
    assert abs(n_r - 5000) < Z_MAX * np.sqrt(5000)
    assert np.sum(writes & (pages >= 100)) == 0
    assert abs(np.sum(~writes & (pages >= 100)) - 2000) < Z_MAX * np.sqrt(2000)
    with pytest.raises(ValueError):
        poisson_events(f, 0.0, 1e9, rng, max_events=1000)
    ex = ExactSource.from_timeline(simple_timeline(), 0.0, 4.0, rng)
    assert len(ex) > 0 and ex.npages == 2048


# -----------------------------------------------------------------------------------
# AccessedBits
# -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["rate", "exact"])
def test_bits_set_stays_set_until_cleared(kind):
    tl = simple_timeline()
    src = RateSource(tl) if kind == "rate" else \
        ExactSource.from_timeline(tl, 0.0, 4.0, np.random.default_rng(4))
    ab = AccessedBits(src, np.random.default_rng(5))
    idx = np.arange(2048)
    ab.clear_all(0, 0.0)
    b1 = ab.test(0, idx, 0.5)
    assert b1[:64].mean() > 0.5           # hot pages: 1 - exp(-1.5) = 0.78
    assert not b1[576:1024].any()          # zero-rate range never set
    b2 = ab.test(0, idx, 0.5)              # same time: same answer
    assert np.array_equal(b1, b2)
    b3 = ab.test(0, idx, 0.9)
    assert np.all(b3[b1])                  # once set, stays set
    got = ab.test_and_clear(0, idx, 1.0)
    assert np.all(got[b3])
    # nothing happens in the stall: a bit cleared at 1.0 is still clear at 2.0
    assert not ab.test(0, idx, 2.0).any()
    # duplicates in one call get one answer
    d = ab.test(0, np.array([5, 5, 5, 700]), 3.5)
    assert d[0] == d[1] == d[2] and not d[3]


def test_bits_match_ground_truth_on_exact_log():
    """On an exact log the primitive must equal the hardware truth (bit set iff some
    access below the entry since its last clear), through many runs and merges."""
    tl = simple_timeline()
    ex = ExactSource.from_timeline(tl, 0.0, 4.0, np.random.default_rng(20))
    ab = AccessedBits(ex, np.random.default_rng(21), horizon=100.0)
    for lv in ab.levels:
        lv.max_runs = 3  # force many merges
    rng = np.random.default_rng(22)
    last = {lvl: {} for lvl in (0, 1)}
    floor = {0: 0.0, 1: 0.0}
    for now in np.linspace(0.01, 4.0, 300):
        lvl = int(rng.integers(2))
        nent = 2048 // LEVEL_SPAN[lvl]
        idx = rng.integers(0, nent, int(rng.integers(1, 40)))
        op = rng.choice(["clear", "test", "tac", "test", "all"], p=[.3, .3, .3, .05, .05])
        since = np.array([last[lvl].get(int(i), floor[lvl]) for i in idx])
        span = LEVEL_SPAN[lvl]
        truth = ex.accessed(idx * span, (idx + 1) * span, since, now)
        if op == "clear":
            ab.clear(lvl, idx, now)
        elif op == "all":
            ab.clear_all(lvl, now)
            last[lvl].clear()
            floor[lvl] = now
            continue
        else:
            got = (ab.test if op == "test" else ab.test_and_clear)(lvl, idx, now)
            assert np.array_equal(got, truth), (op, now)
        if op in ("clear", "tac"):
            for i in idx:
                last[lvl][int(i)] = now
    assert max(len(lv.runs) for lv in ab.levels) == 3
    # stateless clear-then-test agrees exactly with clear + test
    idx = np.arange(0, 2048, 3)
    ab2 = AccessedBits(ex, None)
    ab2.clear(0, idx, 0.3)
    want = ab2.test(0, idx, 0.8)
    ab3 = AccessedBits(ex, None)
    assert np.array_equal(ab3.test_since(0, idx, 0.3, 0.8), want)
    assert ab3.checks == 2 * len(idx)


def test_upper_levels_follow_range_sum():
    """PMD bit set with probability 1 - exp(-sum of rates below); an empty range never."""
    npages = 512 * 4000
    hot = np.arange(0, 4000, 2) * 512 + 7   # one hot page in every other PMD
    f = RateField(hot, hot + 1, np.full(len(hot), 1e-3), np.zeros(len(hot)), npages)
    tl = Timeline(f)
    tl.advance(1.0, 1000.0)  # Lambda = 1 per hot page
    rs = RateSource(tl)
    ab = AccessedBits(rs, np.random.default_rng(6))
    ab.clear_all(1, 0.0)
    bits = ab.test(1, np.arange(4000), 1.0)
    assert not bits[1::2].any()
    p = 1 - np.exp(-1.0)
    n = 2000
    assert abs(bits[0::2].sum() - n * p) < Z_MAX * np.sqrt(n * p * (1 - p))
    # PUD (1 GiB = 262144 pages) covers ~512 hot pages: set for sure; beyond: never
    ab.clear_all(2, 0.0)
    pud = ab.test(2, np.arange(12), 1.0)
    assert pud[:8].all() and not pud[8:].any()


def test_huge_address_space_is_sparse():
    """5 TiB address space (1.34 G pages): levels answer without per-page state."""
    npages = 5 * (1 << 40) // 4096
    start = npages - (1 << 20)
    f = RateField([start], [start + 2560], [1e-2], [0.0], npages)
    tl = Timeline(f)
    tl.advance(10.0, 1e4)
    ab = AccessedBits(RateSource(tl), np.random.default_rng(7))
    top = ab.test(3, np.arange(npages // LEVEL_SPAN[3] + 1), 10.0)
    hit = start // LEVEL_SPAN[3]
    assert top[hit] and top.sum() == 1
    ab.clear_all(1, 10.0)
    assert ab.checks == len(top) + -(-npages // 512)
    assert ab.stored() == len(top)


def test_horizon_bounds_lookback_and_memory():
    f = RateField([0], [1024], [1e-2], [0.0], 1024)
    tl = Timeline(f)
    tl.advance(1.0, 1000.0)     # ten accesses per page in the first second ...
    tl.advance(100.0, 1000.0)   # ... then nothing
    rs = RateSource(tl)
    short = AccessedBits(rs, np.random.default_rng(8), horizon=10.0)
    long = AccessedBits(rs, np.random.default_rng(8), horizon=200.0)
    idx = np.arange(1024)
    assert not short.test(0, idx, 50.0).any()   # accesses older than the horizon: gone
    assert long.test(0, idx, 50.0).mean() > 0.99
    # records older than the horizon are pruned
    for t in np.arange(51.0, 90.0, 1.0):
        short.clear(0, idx + int(t) * 2048, t)
    assert short.stored(0) <= 1024 * 14
    # a record cap forgets the oldest entries and raises the floor past them
    capped = AccessedBits(rs, np.random.default_rng(9), max_entries=5000)
    for t in np.arange(0.1, 1.0, 0.1):
        capped.clear(0, np.arange(1000) + int(t * 10) * 1000, t)
    assert capped.stored(0) <= 5000
    assert capped.levels[0].floor > 0.0


def test_bits_cost_accounting_and_errors():
    tl = simple_timeline()
    ab = AccessedBits(RateSource(tl), np.random.default_rng(10), check_cost=2e-7)
    ab.clear(0, np.arange(10), 0.0)
    ab.test(0, np.arange(5), 0.5)
    ab.test_and_clear(1, [0, 1], 0.5)
    assert ab.checks == 17
    assert ab.cpu_seconds == pytest.approx(17 * 2e-7)
    ab.clear_all(1, 1.0)
    assert ab.checks == 17 + 4
    assert AccessedBits(RateSource(tl), None).check_cost == PTE_CHECK_SECONDS
    with pytest.raises(ValueError):
        ab.test(4, [0], 1.0)


# -----------------------------------------------------------------------------------
# PEBS
# -----------------------------------------------------------------------------------
def test_pebs_counts_and_classification():
    tl = simple_timeline()
    rs = RateSource(tl)

    def node_of(p):
        return np.where(np.asarray(p) < 64, 0, 2)

    pb = PebsSampler(rs, period=(7, 11, 5), node_of=node_of, fast_nodes=[0],
                     rng=np.random.default_rng(11))
    out = pb.poll(0.0, 4.0)
    fp, ft = out.fast_load
    sp, _ = out.slow_load
    wp, _ = out.store
    assert np.all(fp < 64) and np.all(sp >= 64)
    r_fast, _ = rs.expected([0], [64], 0.0, 4.0)
    r_slow, _ = rs.expected([64], [2048], 0.0, 4.0)
    _, w_all = rs.expected([0], [2048], 0.0, 4.0)
    for n, m in ((len(fp), r_fast[0] / 7), (len(sp), r_slow[0] / 11), (len(wp), w_all[0] / 5)):
        assert abs(n - m) < Z_MAX * np.sqrt(m), (n, m)
    assert np.all(np.diff(ft) >= 0) and np.all((ft > 0) & (ft <= 4.0))
    assert sum(pb.samples.values()) == len(fp) + len(sp) + len(wp)
    assert pb.cpu_seconds == pytest.approx((len(fp) + len(sp) + len(wp)) * pb.sample_cost)
    assert len(pb.poll_until(4.0).store[0]) == 0  # nothing after 4.0


def test_pebs_period_forms():
    rs = RateSource(simple_timeline(), node_of=lambda p: np.zeros(len(p), dtype=int))
    assert PebsSampler(rs, 5003).period == {"fast_load": 5003, "slow_load": 5003,
                                            "store": 5003}
    pb = PebsSampler(rs, {"fast_load": 5003, "slow_load": 10007, "store": 19997})
    assert pb.period["store"] == 19997
    with pytest.raises(ValueError):
        PebsSampler(rs, {"loads": 5})
    with pytest.raises(ValueError):
        PebsSampler(RateSource(simple_timeline()), 5)  # no node_of anywhere


# -----------------------------------------------------------------------------------
# Hint faults
# -----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["rate", "exact"])
def test_hint_faults_once_each(kind):
    tl = simple_timeline()
    src = RateSource(tl) if kind == "rate" else \
        ExactSource.from_timeline(tl, 0.0, 4.0, np.random.default_rng(12))
    hf = HintFaults(src, np.random.default_rng(13))
    pages = np.arange(2048)
    assert hf.arm(pages, 0.2) == 2048
    assert hf.arm(pages[:100], 0.4) == 0      # already armed: keeps the 0.2 arm time
    seen = []
    for t in np.arange(0.25, 4.01, 0.25):
        p, ft, lat = hf.poll(t)
        assert np.all(lat >= 0) and np.all(ft <= t + 1e-12) and np.all(ft > 0.2)
        np.testing.assert_allclose(lat, ft - 0.2)
        assert np.all(np.diff(ft) >= 0)
        seen.append(p)
    seen = np.concatenate(seen)
    assert len(seen) == len(np.unique(seen)) == hf.faults
    assert not np.any((seen >= 576) & (seen < 1024))   # zero-rate pages never fault
    assert np.isin(np.arange(64), seen).mean() > 0.9   # hot pages do
    assert hf.armed == 2048 - hf.faults
    assert hf.fault_seconds == pytest.approx(hf.faults * 1.5e-6)
    hf.disarm(np.arange(2048))
    assert hf.armed == 0 and len(hf.poll(5.0)[0]) == 0


def test_hint_faults_rate_polls_consistent():
    """Rate model: thresholds drawn at arm time, so fine polling and one coarse poll
    give the same faults at the same times."""
    tl = simple_timeline()
    fine = HintFaults(RateSource(tl), np.random.default_rng(14))
    coarse = HintFaults(RateSource(tl), np.random.default_rng(14))
    pages = np.arange(2048)
    fine.arm(pages, 0.1)
    coarse.arm(pages, 0.1)
    got = [fine.poll(t) for t in np.arange(0.2, 4.01, 0.1)]
    pf = np.concatenate([g[0] for g in got])
    tf = np.concatenate([g[1] for g in got])
    pc, tc, _ = coarse.poll(4.0)
    assert set(pf.tolist()) == set(pc.tolist())
    of, oc = np.argsort(pf), np.argsort(pc)
    np.testing.assert_allclose(tf[of], tc[oc], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("horizon", [10.0, 1.5])
@pytest.mark.parametrize("chunk", [1 << 22, 7, "fused"])
@pytest.mark.parametrize("ordered", [False, True])
def test_since_table_is_test_since(horizon, chunk, ordered, monkeypatch):
    """Clear times given as a table and an index per page (kswapd's pass times,
    Nimble's check times) give the same bits from the same stream as per-page times:
    across a field change, a stall, the look-back clamp and chunk boundaries, with
    pages in random order or in runs of addresses (the kernels keep a page's field row
    while the next page stays in it). "fused": the compiled pass that draws the stream
    itself (`draws.draw_accessed`), in blocks of 7 pages; otherwise by chunks."""
    if chunk == "fused":
        if not jit.numba_jit():
            pytest.skip("the fused pass needs numba")
        monkeypatch.setattr(draws, "DRAW_BLOCK", 7)
    else:
        monkeypatch.setattr(source_mod, "draw_accessed", lambda *a, **k: False)
        monkeypatch.setattr(RateSource, "TABLE_CHUNK", chunk)
    rng = np.random.default_rng(11)
    table = np.array([0.0, 0.5, 1.0, 1.5, 2.5, 3.0, 3.5])
    for now in (0.7, 2.0, 3.2, 4.0):
        pages = rng.integers(0, 2048, 3000)
        if ordered:  # ascending runs, as a CLOCK hand or an LRU list hands them out
            pages = np.concatenate([np.sort(c) for c in np.array_split(pages, 5)])
        which = rng.integers(0, int(np.searchsorted(table, now)), 3000).astype(np.uint16)
        got, want = [], []
        per_page = np.zeros(2048, np.uint16)
        per_page[pages] = which
        which = per_page[pages]  # one clear time per page (pages repeat)
        by_page = []
        for out, call in ((got, lambda b: b.test_since_table(pages, which, table, now)),
                          (want, lambda b: b.test_since(0, pages, table[which], now)),
                          (by_page, lambda b: b.test_since_table(pages, per_page, table,
                                                                 now, by_page=True))):
            bits = AccessedBits(RateSource(simple_timeline()), np.random.default_rng(3),
                                horizon=horizon)
            out.append(call(bits))
            out.append((bits.checks, bits.cpu_seconds))
        assert got[0].any() and not got[0].all()
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(by_page[0], want[0])
        assert got[1] == want[1] == by_page[1]


@pytest.mark.parametrize("ties", [False, True])
def test_fault_batches_are_a_stable_sort(ties):
    """Scheduled hint faults sort each batch by fault work, equal works in input order
    (the stable sort's order), and merge two batches into what sorting their
    concatenation stably gives (issue 18: the compiled sort and merge)."""
    from tierlab.monitors.hint_faults import _sorted_batch
    rng = np.random.default_rng(5)
    wf = rng.random(5000) * 1e9
    if ties:
        wf = np.round(wf / 1e7) * 1e7          # about 100 distinct works
    pages = rng.permutation(5000).astype(np.int32)
    arm = np.arange(5000, dtype=np.uint32)
    b = _sorted_batch(wf, pages, arm)
    order = np.argsort(wf, kind="stable")
    np.testing.assert_array_equal(b.keys, wf[order])
    np.testing.assert_array_equal(b.pages, pages[order])
    np.testing.assert_array_equal(b.tag, arm[order])
    b1, b2 = _sorted_batch(wf[:2000], pages[:2000], arm[:2000]), \
        _sorted_batch(wf[2000:], pages[2000:], arm[2000:])
    w, p, a = merge_sorted(*b1.live(), *b2.live())
    cat = np.concatenate((b1.keys, b2.keys))
    o = np.argsort(cat, kind="stable")
    np.testing.assert_array_equal(w, cat[o])
    np.testing.assert_array_equal(p, np.concatenate((b1.pages, b2.pages))[o])
    np.testing.assert_array_equal(a, np.concatenate((b1.tag, b2.tag))[o])
    assert p.dtype == np.int32 and a.dtype == np.uint32


# -----------------------------------------------------------------------------------
# Speed
# -----------------------------------------------------------------------------------
def test_accessed_10k_regions_is_fast():
    tl = simple_timeline()
    rs = RateSource(tl)
    rng = np.random.default_rng(15)
    a = rng.integers(0, 2048, 10_000)
    b = a + rng.integers(1, 64, 10_000)
    t0 = rng.uniform(0.0, 3.5, 10_000)
    rs.accessed(a, b, t0, 4.0, rng)
    best = np.inf
    for _ in range(5):
        t = time.perf_counter()
        rs.accessed(a, b, t0, 4.0, rng)
        best = min(best, time.perf_counter() - t)
    assert best < 0.02, best   # typically ~1 ms on a slow core, two field epochs


def test_record_cap_with_repeated_keys_does_not_crash():
    """Regression: runs holding the same keys exceed the cap before merging but not
    after; pruning must then keep them all instead of partitioning out of range."""
    f = RateField([0], [1000], [1.0], [0.0], 1000)
    tl = Timeline(f)
    tl.advance(1.0, 100.0)
    bits = AccessedBits(RateSource(tl), np.random.default_rng(0), horizon=100.0,
                        max_entries=400)
    keys = np.arange(100)  # 5 runs x 100 > cap 400, but merged 100 < keep 300
    for i in range(5):
        bits.test_and_clear(0, keys, 0.1 * (i + 1))
    assert bits.stored(0) <= 400
    assert bits.test(0, keys, 0.5).dtype == bool


def test_sorted_batch_is_the_stable_order_with_and_without_ties():
    """The hint faults' batches: numpy's unstable sort where no two works are equal,
    the stable order where some are (ties, -0.0 and 0.0, NaN)."""
    from tierlab.monitors.hint_faults import _sorted_batch
    rng = np.random.default_rng(5)
    for wf in (rng.exponential(size=5000), np.round(rng.random(5000) * 30),
               np.array([0.0, -0.0, 1.0, 0.0, -0.0]), np.array([np.nan, 1.0, np.nan, 0.5])):
        pages = np.arange(wf.shape[0], dtype=np.int32)
        b = _sorted_batch(wf, pages, pages.astype(np.uint32))
        order = np.argsort(wf, kind="stable")
        np.testing.assert_array_equal(b.pages, pages[order])
        np.testing.assert_array_equal(b.keys, wf[order])


@pytest.mark.parametrize("seed", range(20))
def test_level_lookup_takes_the_newest_record_of_each_key(seed):
    """A level's lookup finds each key's record in the newest run holding it, whatever
    the runs' key ranges (disjoint, nested, overlapping, empty) and the keys asked."""
    from tierlab.monitors.primitives import _Level, _Run
    rng = np.random.default_rng(seed)
    lv = _Level()
    newest = {}
    for _ in range(int(rng.integers(0, 8))):
        a = int(rng.integers(0, 500))
        keys = np.unique(rng.integers(a, a + int(rng.integers(1, 400)), int(rng.integers(0, 60))))
        since, isset = rng.random(keys.size), rng.random(keys.size) < 0.5
        lv.runs.append(_Run(keys, since, isset, np.zeros(keys.size)))
        for k, s, b in zip(keys.tolist(), since.tolist(), isset.tolist()):
            newest.setdefault(k, (s, b))  # runs are newest first
    u = np.unique(rng.integers(0, 1000, int(rng.integers(0, 300))))
    found, since, isset = lv.lookup(u)
    for i, k in enumerate(u.tolist()):
        assert found[i] == (k in newest)
        if k in newest:
            assert (since[i], isset[i]) == newest[k]
        else:
            assert since[i] == -np.inf and not isset[i]


@pytest.mark.parametrize("half", [False, True])
@pytest.mark.parametrize("blocks", [1, 7, 1024])
def test_fused_draws_are_the_chunked_ones_and_leave_the_same_stream(half, blocks,
                                                                    monkeypatch):
    """`draws.draw_accessed` draws numpy's PCG64 stream in the kernel: the same bits
    as `rng.random` with `draw_below` by chunks, and the generator left exactly where
    they leave it (its state, and half of a 32-bit draw it may hold), so every draw
    after is the same too."""
    if not jit.numba_jit():
        pytest.skip("the fused pass needs numba")
    monkeypatch.setattr(draws, "DRAW_BLOCK", blocks)
    table = np.array([0.0, 0.5, 1.0, 2.5])
    runs = []
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr(source_mod, "draw_accessed", lambda *a, **k: False)
        rng = np.random.default_rng(21)
        pages = np.sort(rng.integers(0, 2048, 5000))
        which = rng.integers(0, 4, 5000).astype(np.uint16)
        bits = AccessedBits(RateSource(simple_timeline()), np.random.default_rng(4))
        if half:
            bits.rng.integers(0, 10, dtype=np.int32)  # holds half of a 64-bit output
        got = [bits.test_since_table(pages, which, table, t) for t in (0.7, 3.2, 4.0)]
        runs.append((got, bits.rng.bit_generator.state,
                     bits.rng.integers(0, 2**31, 5, dtype=np.int32), bits.rng.random(3)))
    (a, sa, ia, ra), (b, sb, ib, rb) = runs
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)
    assert any(x.any() and not x.all() for x in a)
    assert sa == sb
    np.testing.assert_array_equal(ia, ib)
    np.testing.assert_array_equal(ra, rb)


@pytest.mark.parametrize("m", [1_000_000, 3, 0])
def test_pcg64_fill_is_numpys_random(m):
    """The kernels' PCG64 (`_pcg64_fill`: four states stepped from one), compiled,
    against numpy's `Generator.random`: a million draws, and fewer than one group of
    four, and the state it leaves."""
    if not jit.numba_jit():
        pytest.skip("needs numba")
    fill = jit.compiled(pcg64._pcg64_fill)
    g = np.random.default_rng(2**63 + 12345)
    g.random(3)
    s, inc = g.bit_generator.state["state"]["state"], g.bit_generator.state["state"]["inc"]
    st = np.array([s >> 64, s & ((1 << 64) - 1)], np.uint64)
    u = np.full(m + 1, -1.0)
    fill(st, pcg64.pcg64_jump(inc), u, m)
    np.testing.assert_array_equal(u[:m], g.random(m))
    assert u[m] == -1.0
    assert (int(st[0]) << 64) | int(st[1]) == g.bit_generator.state["state"]["state"]


@pytest.mark.parametrize("chunk", [1 << 22, 7])
def test_since_table_discarded_uses_up_the_same_draws(chunk, monkeypatch):
    """A check whose answer the caller drops (Nimble's active scan) is charged the same
    and leaves the stream where the check itself would: the next checks give the same
    bits. A generator holding half of a 32-bit draw makes the check itself."""
    monkeypatch.setattr(RateSource, "TABLE_CHUNK", chunk)
    rng = np.random.default_rng(12)
    table = np.array([0.0, 0.5, 1.0, 2.5])
    pages = rng.integers(0, 2048, 3000)
    which = rng.integers(0, 4, 3000).astype(np.uint16)
    runs = []
    for discard, half in ((False, False), (True, False), (True, True)):
        bits = AccessedBits(RateSource(simple_timeline()), np.random.default_rng(3))
        if half:
            bits.rng.integers(0, 10, dtype=np.int32)  # leaves half of a 64-bit output
        first = bits.test_since_table(pages, which, table, 3.0, discard=discard)
        assert (first is None) == (discard and not half)
        after = bits.test_since_table(pages, which, table, 3.5)
        runs.append((after, bits.checks, bits.cpu_seconds, half))
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    assert runs[0][1:3] == runs[1][1:3] == runs[2][1:3]
    assert runs[0][0].any() and not runs[0][0].all()
