"""The compiled kernels return exactly what the numpy expressions they replace return
(issue 18: results identical whichever runs)."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays


from test_engine import small_machine
from tierlab.engine import lru, pagemap, throughput
from tierlab.engine.lru import move_counts, set_active
from tierlab.engine.pagemap import NodeBits, move_pages, relocate_sums
from tierlab import field, jit, pcg64, structures
from tierlab.monitors import draws, hint_faults, idt_regions
from tierlab.monitors.draws import draw_accessed
from tierlab.monitors.idt_regions import ring_bits, similar_pairs, window_counts
from tierlab.policies import colloid, hemem, memtis, nimble
from tierlab.policies.idt import policy as idt_policy
from tierlab.policies.memtis import cooled_bins, memtis_cool, set_counts
from tierlab.policies.nimble import LruLists
from tierlab.structures import PageBits, SMALL, Scratch, argsort_stable, merge_sorted

floats = st.floats(allow_nan=True, allow_infinity=True, width=64)
# a few distinct values make ties, the case where only a stable sort's order is right
few = st.sampled_from([0.0, -0.0, 1.5, -2.0, 1e300, np.inf, -np.inf, np.nan, 5e-324])


@settings(max_examples=60, deadline=None)
@given(st.one_of(arrays(np.float64, st.integers(0, 3 * SMALL), elements=floats),
                 arrays(np.float64, st.integers(SMALL + 1, 4 * SMALL), elements=few)))
def test_argsort_stable_is_numpys(keys):
    np.testing.assert_array_equal(argsort_stable(keys), np.argsort(keys, kind="stable"))


@settings(max_examples=80, deadline=None)
@given(st.one_of(arrays(np.float64, st.integers(0, 3 * SMALL), elements=floats),
                 arrays(np.float64, st.integers(0, 4 * SMALL), elements=few),
                 arrays(np.float64, st.integers(0, 4 * SMALL),
                        elements=st.floats(0, 1e6, allow_nan=False))))
def test_argsort_untied_is_numpys_stable_argsort(keys):
    """The quicksort's order where no key ties, the stable sort's where some do (ties,
    NaN, both zeros), with the keys in that order."""
    order, k = structures.argsort_untied(keys)
    want = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(order, want)
    np.testing.assert_array_equal(k, keys[want])


@settings(max_examples=80, deadline=None)
@given(st.integers(structures.SMALL, 3000), st.sampled_from(["uniform", "exp", "ties",
                                                         "lumps", "huge", "tiny"]),
       st.integers(0, 2**31 - 1))
def test_argsort_untied_by_buckets_is_numpys_stable_argsort(n, kind, seed):
    """The bucket sort's sizes: near-uniform keys (its case), skewed ones, many ties
    and both zeros, lumps that overfill a bucket (it gives up), spans that overflow a
    double and keys a few ulps apart: always numpy's stable order, and the keys in it."""
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        keys = 3.0 + rng.random(n) * 7.0
    elif kind == "exp":
        keys = rng.exponential(size=n)
    elif kind == "ties":
        keys = rng.choice([0.0, -0.0, 1.5, 2.0], n)
    elif kind == "lumps":
        keys = np.concatenate((rng.random(n // 2) * 1e-6, 1 + rng.random(n - n // 2)))
    elif kind == "huge":
        keys = rng.choice([-1.7e308, 1.7e308], n) * rng.random(n)
    else:
        keys = 1.0 + rng.integers(0, 50, n) * np.finfo(float).eps
    keys = keys[rng.permutation(n)]
    order, k = structures.argsort_untied(keys)
    want = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(order, want)
    np.testing.assert_array_equal(k, keys[want])
    assert np.array_equal(np.signbit(k), np.signbit(keys[want]))


@settings(max_examples=60, deadline=None)
@given(arrays(np.int64, st.integers(0, 2000), elements=st.integers(-5, 300)))
def test_unique_counts_is_numpys_unique(a):
    u, c = structures.unique_counts(a)
    wu, wc = np.unique(a, return_counts=True)
    np.testing.assert_array_equal(u, wu)
    np.testing.assert_array_equal(c, wc)
    assert (u.dtype, c.dtype) == (wu.dtype, wc.dtype)


@settings(max_examples=60, deadline=None)
@given(arrays(np.int64, st.integers(0, 2000), elements=st.integers(0, 300)),
       st.integers(0, 2**31 - 1))
def test_unique_event_counts_is_unique_and_bincount(p, seed):
    ev = np.random.default_rng(seed).integers(0, 3, p.size).astype(np.int8)
    u, c = structures.unique_event_counts(p, ev, 3)
    wu, inv = np.unique(p, return_inverse=True)
    want = np.bincount(inv * 3 + ev, minlength=3 * len(wu)).reshape(len(wu), 3)
    np.testing.assert_array_equal(u, wu)
    np.testing.assert_array_equal(c, want)
    assert c.dtype == want.dtype and c.shape == want.shape


@settings(max_examples=80, deadline=None)
@given(st.integers(2, 30), st.integers(0, 3000), st.integers(0, 2**31 - 1))
def test_by_time_is_time_at_work_then_its_stable_sort(nb, n, seed):
    """PEBS samples ordered by time: the works' sort and one walk over the breakpoints
    give the times and the order that time_at_work and a stable sort of the times give
    (flat stretches of work, works past both ends, repeated works); where the times
    tie it declines."""
    from tierlab.engine.timeline import Timeline
    rng = np.random.default_rng(seed)
    ta = np.cumsum(rng.random(nb) + 0.01)
    wa = np.cumsum(np.where(rng.random(nb) < 0.2, 0.0, rng.random(nb) * 5))
    works = rng.random(n) * (wa[-1] + 2) - 1
    if seed % 2:  # inside the breakpoints: the times strictly ascend
        works = wa[0] + rng.random(n) * (wa[-1] - wa[0])
    if seed % 4 == 0 and n > 1:
        works[: n // 2] = works[0]  # ties
    tl = Timeline.__new__(Timeline)
    tl._tb, tl._wb, tl._n = ta, wa, nb
    want_t = tl.time_at_work(works)
    want_o = np.argsort(want_t, kind="stable")
    got = draws.by_time(works, ta, wa)
    if seed % 2 and jit.numba_jit() and wa[-1] > wa[0]:  # works inside: distinct times
        assert got is not None
    if got is None:
        assert not jit.numba_jit() or np.any(np.diff(want_t[want_o]) <= 0)
        return
    order, times = got
    np.testing.assert_array_equal(order, want_o)
    np.testing.assert_array_equal(times, want_t[want_o])


def test_argsort_stable_large_random_and_shared_digits():
    rng = np.random.default_rng(3)
    for keys in (rng.random(200_000) * 1e6,
                 5.3e11 + rng.exponential(size=100_000),   # high digits shared
                 np.round(rng.random(100_000) * 50)):      # many ties
        np.testing.assert_array_equal(argsort_stable(keys), np.argsort(keys, kind="stable"))


@settings(max_examples=60, deadline=None)
@given(arrays(np.float64, st.integers(0, 600), elements=few.filter(lambda x: x == x)),
       arrays(np.float64, st.integers(0, 600), elements=few.filter(lambda x: x == x)))
def test_merge_sorted_is_a_stable_sort_of_both(w1, w2):
    w1, w2 = np.sort(w1, kind="stable"), np.sort(w2, kind="stable")
    p1 = np.arange(w1.size, dtype=np.int32)
    p2 = np.arange(w2.size, dtype=np.int32) + 10_000
    a1, a2 = p1.astype(np.uint32), p2.astype(np.uint32)
    w, p, a = merge_sorted(w1, p1, a1, w2, p2, a2)
    o = np.argsort(np.concatenate((w1, w2)), kind="stable")
    np.testing.assert_array_equal(w, np.concatenate((w1, w2))[o])
    np.testing.assert_array_equal(p, np.concatenate((p1, p2))[o])
    np.testing.assert_array_equal(a, np.concatenate((a1, a2))[o])


def _pages_on_numpy(node_map, node, start, limit, flags=None, mask=0, value=0):
    """The address scan as numpy writes it: whole windows, doubling."""
    npages = node_map.shape[0]
    chunk, found, n, scanned = max(4 * limit, 4096), [], 0, 0
    pos = start % max(npages, 1)
    while n < limit and scanned < npages:
        end = min(pos + chunk, npages, pos + npages - scanned)
        sel = node_map[pos:end] == node
        if flags is not None:
            sel &= (flags[pos:end] & mask) == value
        hits = np.flatnonzero(sel) + pos
        if n + len(hits) > limit:
            hits = hits[: limit - n]
            end = int(hits[-1]) + 1
        found.append(hits)
        n += len(hits)
        scanned += end - pos
        pos = end % npages
        chunk = min(2 * chunk, 1 << 22)
    pages = np.concatenate(found) if found else np.zeros(0, dtype=np.int64)
    return pages.astype(np.int64), pos, scanned


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 40_000), st.integers(0, 3), st.integers(0, 50_000),
       st.integers(0, 20_000), st.booleans(), st.booleans(), st.integers(0, 2**32 - 1))
def test_pages_on_is_the_numpy_scan(npages, node, start, limit, use_flags, clustered,
                                    seed):
    """The bitmap scan returns the byte scan's pages, hand position and addresses;
    `clustered`: most 512-page blocks, and some runs across their bounds, hold none of
    the pages or few (as a DRAM node's inactive pages lie: 13-16% of the blocks hold
    one in autonuma-tiering's run at bench_scale), so that most words hold none."""
    rng = np.random.default_rng(seed)
    p = rng.random(4)
    node_map = rng.choice(np.array([0, 1, 2, 255], np.uint8), npages, p=p / p.sum())
    if clustered:  # blocks empty (60%), sparse (30%: 2% of their pages kept) or not
        kind = np.repeat(rng.random(-(-npages // 512)), 512)[:npages]
        node_map[(kind < 0.6) | ((kind < 0.9) & (rng.random(npages) < 0.98))] = 255
        for a in rng.integers(0, max(npages, 1), 3):
            node_map[int(a):int(a) + int(rng.integers(1, 3000))] = 255
    flags = rng.integers(0, 8, npages).astype(np.uint8) if use_flags else None
    bits = NodeBits(node_map, 4)
    got = bits.pages_on(node, start, limit, flags, 1, 1)
    want = _pages_on_numpy(node_map, node, start, limit, flags, 1, 1)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[0].dtype == np.int64
    assert got[1:] == want[1:]
    # with a hand's pass times: each page's interval and the least time, same pass
    from tierlab.engine.memory import PassTimes
    passes = PassTimes(npages)
    for a in rng.integers(0, max(npages, 1), 6):
        passes.set(int(a), int(a) + int(rng.integers(1, 5000)), float(rng.random()))
    got = bits.pages_on(node, start, limit, flags, 1, 1, passes=passes)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1:3] == want[1:]
    which, tmin = got[3]
    np.testing.assert_array_equal(which, passes.index(want[0]))
    assert tmin == (passes.times[which].min() if len(which) else np.inf)
    if flags is not None:  # the flag as a bitmap (PageBits), set and clear
        sel = PageBits((flags & 1) != 0).words
        for on in (True, False):
            got = bits.pages_on(node, start, limit, sel=sel, sel_on=on)
            want = _pages_on_numpy(node_map, node, start, limit, flags, 1, int(on))
            np.testing.assert_array_equal(got[0], want[0])
            assert got[1:] == want[1:]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 3000), st.integers(0, 2**32 - 1))
def test_lru_active_bitmap_is_the_active_flag(npages, seed):
    """After any sequence of first touches, frees, (de)activations, marks and a caller
    setting flags itself (then `active_changed`), the bitmap the LRU hands read is
    exactly the ACTIVE flag of every page, from the clear bitmap it starts with."""
    from tierlab.engine.lru import ACTIVE, LRU
    from tierlab.engine.memory import Memory

    class Sim:
        machine = small_machine(npages, npages, tiers=2)
        mem = Memory(machine, npages)

    rng = np.random.default_rng(seed)
    sim = Sim()
    lru = LRU(sim)
    for _ in range(30):
        op = rng.integers(6)
        a = int(rng.integers(npages))
        b = int(rng.integers(a, npages + 1))
        pages = rng.integers(0, npages, rng.integers(0, 50))
        if op == 0 and (sim.mem.node[a:b] == 255).all():
            sim.mem.place_range(a, b, int(rng.integers(2)))
            lru.on_alloc(a, b)
        elif op == 1:
            lru.on_free(a, b, sim.mem.node[a:b])
            sim.mem.release_range(a, b)
        elif op == 2:
            lru.activate(pages)
        elif op == 3:
            lru.deactivate(pages)
        elif op == 4:
            lru.mark_accessed(pages)
        else:
            lru.flags[pages] ^= ACTIVE
            lru.active_changed()
        on = np.unpackbits(lru.active_bits().view(np.uint8), bitorder="little")[:npages]
        np.testing.assert_array_equal(on.astype(bool), (lru.flags & ACTIVE) != 0)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3000), st.integers(0, 2**32 - 1))
def test_node_bits_follow_placements_frees_and_moves(npages, seed):
    """After any sequence of first touches, frees and moves through Memory, each node's
    bitmap is exactly its pages in the page map."""
    from tierlab.engine.memory import Memory
    rng = np.random.default_rng(seed)
    mem = Memory(small_machine(npages, npages, tiers=4), npages)
    mem.pages_on(0, 0, 1)  # builds the bitmaps: kept from here on
    for _ in range(30):
        op = rng.integers(3)
        a = int(rng.integers(npages))
        b = int(rng.integers(a, npages + 1))
        if op == 0 and (mem.node[a:b] == 255).all():
            mem.place_range(a, b, int(rng.integers(4)))
        elif op == 1:
            mem.release_range(a, b)
        else:
            pages = np.flatnonzero(mem.node != 255)
            pages = rng.permutation(pages)[: rng.integers(0, len(pages) + 1)]
            cur = mem.node[pages]
            mem.move(pages, cur, rng.integers(0, 4, len(pages)).astype(np.uint8))
        bits = np.unpackbits(mem._bits.bits.view(np.uint8), axis=1,
                             bitorder="little")[:, :npages]
        for r in range(4):
            np.testing.assert_array_equal(bits[r].astype(bool), mem.node == r)


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 1100), st.integers(1, 16), st.integers(0, 40), st.integers(0, 2**32 - 1),
       st.sampled_from(["fisher", "public"]), st.sampled_from([16, 64, 100, 1024]))
def test_similar_pairs_is_every_window_counted(valid, window, nregions, seed, rule, nbits):
    """IDT's merge test in one pass with an early stop over ring buffers (any length,
    any newest position) equals counting every window of every region in time order
    (`window_counts`) and looking each pair up."""
    from tierlab.monitors.idt_regions import fisher_similar_table, public_similar_table
    rng = np.random.default_rng(seed)
    valid = min(valid, nbits)
    window = min(window, nbits)
    words = (nbits + 63) // 64
    # sparse, dense and equal histories, so both verdicts occur
    h = rng.integers(0, 2**63, (nregions, words), dtype=np.uint64)
    h[rng.random(nregions) < 0.3] = 0
    h[rng.random(nregions) < 0.3] &= np.uint64(0x0F0F0F0F0F0F0F0F)
    newest = int(rng.integers(0, nbits))
    n = min(window, valid)
    table = fisher_similar_table(n, 0.1) if rule == "fisher" else public_similar_table(n)
    if nregions < 2:
        assert similar_pairs(h, newest, valid, window, nbits, table).shape == (0,)
        return
    c = window_counts(h, newest, valid, window, nbits)
    np.testing.assert_array_equal(similar_pairs(h, newest, valid, window, nbits, table),
                                  table[c[:-1], c[1:]].all(axis=1))
    # the bits in time order: the k-th newest at position (newest - k) mod nbits
    b = ring_bits(h, newest, valid, nbits)
    p = (newest - 1) % nbits
    if valid > 1:
        assert b[:, 1].tolist() == ((h[:, p // 64] >> np.uint64(p % 64)) &
                                    np.uint64(1)).tolist()


def _lru_pages(rng, npages, ntimes, dtype, run):
    """A node map (node 0's pages: whole blocks of 64 with and without them, and
    mixed ones), flags and insertion indexes, constant over runs of up to `run`
    addresses (the lists' runs that the passes count and keep in registers)."""
    node_map = rng.choice(np.array([0, 1, 255], np.uint8), npages, p=[0.5, 0.3, 0.2])
    node_map[: npages // 3] = 1  # whole blocks without node 0: skipped by their counts
    node_map[npages // 3: npages // 2] = 0  # and whole blocks of it
    cuts = np.flatnonzero(rng.random(npages) < 1 / run)
    seg = np.searchsorted(cuts, np.arange(npages), side="right")
    flags = rng.integers(0, 8, len(cuts) + 1).astype(np.uint8)[seg]
    inserted = rng.integers(0, ntimes, len(cuts) + 1).astype(dtype)[seg]
    block = 64
    nb = -(-npages // block)
    blocks = np.array([(node_map[b * block:(b + 1) * block] == 0).sum() for b in range(nb)],
                      dtype=np.int32)
    return node_map, flags, inserted, blocks, block


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 5000), st.integers(1, 40), st.integers(0, 2**32 - 1),
       st.sampled_from([np.uint16, np.uint32]), st.sampled_from([1, 8, 300]))
def test_lru_lists_are_a_stable_sort_by_insertion(npages, ntimes, seed, dtype, run):
    """Each list (and its older half) is the node's pages with the flag set or clear,
    stably sorted by insertion index from address order, as numpy's argsort gives; the
    runs counted are the address-order stretches of the node's pages of one list and
    index."""
    rng = np.random.default_rng(seed)
    node_map, flags, inserted, blocks, block = _lru_pages(rng, npages, ntimes, dtype, run)
    lists = LruLists(node_map, 0, blocks, block, flags, 1, inserted, ntimes)
    on = np.flatnonzero(node_map == 0)
    key = (flags[on] & 1).astype(np.int64) * ntimes + inserted[on]
    assert lists.runs == (int((np.diff(key) != 0).sum()) + 1 if len(on) else 0)
    for active in (False, True):
        mine = on[((flags[on] & 1) != 0) == active]
        want = mine[np.argsort(inserted[mine], kind="stable")]
        got, total = lists.list(active)
        np.testing.assert_array_equal(got, want)
        half, total2 = lists.list(active, half=True)
        np.testing.assert_array_equal(half, want[: len(want) // 2])
        assert total == total2 == len(want)
    # the least tracked value of each list's first pages, from the same pass
    track = rng.integers(0, 1000, npages).astype(np.uint16)
    n0, n1 = lists.lengths()
    k0, k1 = int(rng.integers(0, n0 + 1)), int(rng.integers(0, n1 + 1))
    (p0, p1), mins = lists.first(k0, k1, track=track)
    np.testing.assert_array_equal(p0, lists.list(False)[0][:k0])
    for pages, m in ((p0, mins[0]), (p1, mins[1])):
        assert m == (track[pages].min() if len(pages) else np.iinfo(np.uint16).max)
    # into kept arrays (Nimble's passes): the same pages at every size, larger or
    # smaller than the arrays hold, whatever the arrays held before
    scratch = Scratch()
    for _ in range(4):
        k0, k1 = int(rng.integers(0, n0 + 1)), int(rng.integers(0, n1 + 1))
        (q0, q1), qm = lists.first(k0, k1, track=track, scratch=scratch)
        (w0, w1), wm = lists.first(k0, k1, track=track)
        np.testing.assert_array_equal(q0, w0)
        np.testing.assert_array_equal(q1, w1)
        np.testing.assert_array_equal(qm, wm)
        assert q0.dtype == w0.dtype
        assert q0.base is scratch.arrays[0]  # written in place, not a fresh array
    # from counts the caller kept (Nimble's), with columns to spare: the same lists;
    # counts that promise a page more than the node holds raise instead of listing
    wide = np.zeros((2, ntimes + 5), np.int64)
    wide[:, :ntimes] = lists.hist
    kept = LruLists(node_map, 0, blocks, block, flags, 1, inserted, ntimes + 5, hist=wide)
    for active in (False, True):
        np.testing.assert_array_equal(kept.list(active)[0], lists.list(active)[0])
    wide[0, ntimes + 4] += 1
    with pytest.raises(RuntimeError, match="promise more pages"):
        kept.list(False)


def _draw_tables(rng, npages, multi):
    """`RateSource.draw_tables`-shaped tables of one epoch or of two (concatenated,
    each with its sentinel row first), with rates that set some bits and not others."""
    ks = [int(rng.integers(0, 6)) for _ in range(2 if multi else 1)]
    starts = [np.sort(rng.choice(max(npages, 6), k, replace=False)) for k in ks]
    soff = np.concatenate(([0], np.cumsum(ks))).astype(np.int64)
    rate = rng.random(sum(ks) + len(ks)) * 2
    ends = rng.integers(0, max(npages, 1) + 1, rate.shape[0]).astype(np.int64)
    ne = len(ks)
    return (np.concatenate(starts).astype(np.int64), soff if multi else np.zeros(2, np.int64),
            rate, ends, rng.random(ne), rng.random(ne) < 0.5, 3 + rng.random(ne),
            bool(multi))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 4000), st.integers(1, 12), st.integers(0, 2**32 - 1),
       st.sampled_from([1, 8, 300]), st.booleans())
def test_nimble_aging_in_one_pass_is_listing_drawing_and_aging_apart(npages, ntimes, seed,
                                                                     run, multi):
    """`LruLists.age_inactive` (Nimble's aging of the inactive list's first pages in
    one pass): the activated pages, the active list's first pages, every page's flags,
    insertion and check indexes, and the generator left after, as listing the pages
    (`first`), drawing their bits in list order (`draw_accessed`) and `nimble_inactive`
    give them, whatever the interleaving of indexes in address order, with one epoch's
    tables or several's."""
    if not jit.numba_jit():
        pytest.skip("the one pass needs numba")
    rng = np.random.default_rng(seed)
    node_map, flags, inserted, blocks, block = _lru_pages(rng, npages, ntimes, np.uint16, run)
    checked = np.minimum(inserted, rng.integers(0, ntimes, npages)).astype(np.uint16)
    w_tab = np.sort(rng.random(ntimes + 1)) * 3
    draws = (w_tab, _draw_tables(rng, npages, multi))
    t = ntimes  # now: a new index
    state = [(flags.copy(), inserted.copy(), checked.copy()) for _ in range(2)]
    n_in, n_act = LruLists(node_map, 0, blocks, block, flags, 1, inserted,
                           ntimes + 1).lengths()
    n_clear, n_set = int(rng.integers(0, n_in + 1)), int(rng.integers(0, n_act + 1))
    (fa, ia, ca), (fb, ib, cb) = state
    gen_a, gen_b = np.random.default_rng(seed + 1), np.random.default_rng(seed + 1)
    old_min = nimble.RUN_MIN
    nimble.RUN_MIN = 0  # every interleaving, however short its runs
    try:
        up, act = LruLists(node_map, 0, blocks, block, fa, 1, ia, ntimes + 1).age_inactive(
            n_clear, n_set, ca, 2, t, draws, gen_a)
    finally:
        nimble.RUN_MIN = old_min
    scan, act_b = LruLists(node_map, 0, blocks, block, fb, 1, ib, ntimes + 1).first(
        n_clear, n_set)
    ref = np.zeros(scan.shape[0], bool)
    assert draw_accessed(ref, gen_b, scan, cb, True, *draws)
    upm = nimble.nimble_inactive(scan, ref, fb, ib, cb, t, 1, 2)
    np.testing.assert_array_equal(up, np.sort(scan[upm]))
    np.testing.assert_array_equal(act, act_b)
    for x, y in ((fa, fb), (ia, ib), (ca, cb)):
        np.testing.assert_array_equal(x, y)
    assert gen_a.bit_generator.state == gen_b.bit_generator.state


def test_pcg_advance_is_numpys():
    """The kernels' jump-ahead of the PCG64 state (`_pcg_advance`) against numpy's
    `advance`, from 0 to 2^40 steps."""
    if not jit.numba_jit():
        pytest.skip("needs numba")
    advance = jit.compiled(pcg64._pcg_advance)
    for q in (0, 1, 2, 3, 7, 1000, 65537, 2**40 + 5):
        g = np.random.default_rng(2**63 + q)
        s, inc = g.bit_generator.state["state"]["state"], g.bit_generator.state["state"]["inc"]
        hi, lo = advance(np.uint64(s >> 64), np.uint64(s & (2**64 - 1)), q,
                         pcg64.pcg64_jump(inc))
        g.bit_generator.advance(q)
        assert (int(hi) << 64) | int(lo) == g.bit_generator.state["state"]["state"]


def test_numba_starts_without_scipy_linalg():
    """A process's first kernel does not import scipy.linalg (numba's BLAS check,
    0.3-0.4 s of CPU a process, `jit._numba_arrays`), and scipy.linalg imports as
    usual after it."""
    import subprocess
    import sys
    code = ("import sys, numpy as np\n"
            "from tierlab import jit, structures\n"
            "if not jit.numba_jit(): sys.exit(3)\n"
            "b = structures.PageBits.zeros(128); b.set(np.array([5]), True)\n"
            "assert b.get(np.array([5, 6])).tolist() == [True, False]\n"
            "assert 'scipy.linalg' not in sys.modules\n"
            "from scipy.optimize import minimize\n"
            "assert 'scipy.linalg' in sys.modules\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if r.returncode == 3:
        pytest.skip("needs numba")
    assert r.returncode == 0, r.stderr


def test_without_numba_the_guest_path_still_answers(monkeypatch):
    """The QEMU guest's Python has no numba: IDT's merge test (the one kernel the Linux
    backend runs) falls back to counting every window with numpy, same answer."""
    from tierlab.monitors.idt_regions import fisher_similar_table
    rng = np.random.default_rng(2)
    h = rng.integers(0, 2**63, (500, 16), dtype=np.uint64)
    h[::3] = 0
    h[2::3] = h[1:-1:3]  # equal neighbours merge
    h[5::9, 10] ^= np.uint64(0xFFFF)  # some apart only in an older window
    table = fisher_similar_table(16, 0.1)
    want = idt_regions.similar_pairs(h, 7, 1024, 16, 1024, table)
    import tierlab.jit as jit
    monkeypatch.setattr(jit, "_jit", False)
    monkeypatch.setattr(idt_regions._similar_pairs, "_k", None)
    assert idt_regions._similar_pairs.compiled() is idt_regions._similar_pairs_numpy
    np.testing.assert_array_equal(idt_regions.similar_pairs(h, 7, 1024, 16, 1024, table), want)
    assert want.any() and not want.all()


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 3000), st.integers(0, 3000), st.integers(1, 10**6),
       st.integers(0, 2**32 - 1))
def test_sorted_find_is_searchsorted(m, n, span, seed):
    """The galloping walk finds what numpy's searchsorted finds, hits included: sizes
    from empty to thousands either way, queries before, among and past the keys."""
    rng = np.random.default_rng(seed)
    keys = np.unique(rng.integers(0, span, m))
    q = np.unique(rng.integers(-5, span + 5, n))
    pos, hit = structures.sorted_find(keys, q)
    want = np.searchsorted(keys, q)
    np.testing.assert_array_equal(pos, want)
    ok = want < len(keys)
    want_hit = np.zeros(len(q), bool)
    want_hit[ok] = keys[want[ok]] == q[ok]
    np.testing.assert_array_equal(hit, want_hit)
    p2, h2 = np.empty_like(pos), np.empty_like(hit)
    structures._sorted_find_numpy(keys, q, p2, h2)
    np.testing.assert_array_equal(p2, pos)
    np.testing.assert_array_equal(h2, hit)


@settings(max_examples=80, deadline=None)
@given(arrays(np.int64, st.integers(0, 400), elements=st.integers(0, 5000)))
def test_unique_in_order_keeps_first_occurrences(pages):
    """The engine's move requests without repeats, in the caller's order: the bitset
    pass equals unique-with-indexes, and leaves its scratch clear."""
    _, first = np.unique(pages, return_index=True)
    np.testing.assert_array_equal(structures.unique_in_order(pages), pages[np.sort(first)])
    assert not structures._seen.any()
    keep, dup = structures._first_seen_numpy(pages, None)
    np.testing.assert_array_equal(pages[keep], pages[np.sort(first)])
    assert dup == len(pages) - len(first)


@settings(max_examples=60, deadline=None)
@given(arrays(np.int64, st.integers(0, 400), elements=st.integers(0, 2999)),
       st.integers(0, 2**32 - 1), st.sampled_from([-1, 1]))
def test_list_counts_adds_each_page_at_its_place(pages, seed, sign):
    """Kept LRU list counts follow pages (a repeated page counts each time): each page
    on a kept node adds sign at (its node, ACTIVE or not, its insertion index), pages
    on other nodes or none add nothing; the compiled pass and numpy's agree."""
    rng = np.random.default_rng(seed)
    node_map = rng.choice(np.array([0, 1, 2, 255], np.uint8), 3000)
    flags = rng.integers(0, 8, 3000).astype(np.uint8)
    inserted = rng.integers(0, 50, 3000).astype(np.uint16)
    kept = rng.random(3) < 0.7
    start = rng.integers(0, 9, (3, 2, 64))
    want = start.copy()
    for p in pages:
        d = node_map[p]
        if d != 255 and kept[d]:
            want[d, int(flags[p] & 1 != 0), inserted[p]] += sign
    got = start.copy()
    nimble.list_counts(got, kept, pages, node_map, flags, 1, inserted, sign)
    np.testing.assert_array_equal(got, want)
    got = start.copy()
    nimble._list_counts_numpy(pages, node_map, flags, np.uint8(1), inserted, got, kept, sign)
    np.testing.assert_array_equal(got, want)


@settings(max_examples=60, deadline=None)
@given(arrays(np.int64, st.integers(0, 400), elements=st.integers(0, 3000)), st.booleans())
def test_uniq_of_sorted_runs_is_np_unique(pages, runs):
    from tierlab.field import uniq
    np.testing.assert_array_equal(uniq(pages, runs=runs), np.unique(pages))


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 3000), st.integers(0, 200), st.sampled_from([np.uint32, np.int64]),
       st.integers(0, 2**32 - 1))
def test_cooled_bins_is_the_numpy_histogram(npages, clock, dtype, seed):
    """MEMTIS's per-page histogram in one pass equals lazy halving, get_idx by frexp and
    a bincount (the numpy form it replaced), for 4- and 8-byte counts."""
    rng = np.random.default_rng(seed)
    cnt = (rng.integers(0, 2**32, npages) >> rng.integers(0, 32, npages)).astype(dtype)
    pclk = rng.integers(0, clock + 5, npages).astype(np.int32)  # some ahead: shift 0
    d = np.clip(clock - pclk.astype(np.int64), 0, 62)
    pc = np.right_shift(cnt.astype(np.int64), d) + 1
    e = np.minimum(np.frexp(pc.astype(np.float64))[1], 16)
    want = np.bincount(e, minlength=17)
    np.testing.assert_array_equal(cooled_bins(cnt, pclk, clock, 62, 16), want)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.integers(0, 40), st.sampled_from([np.uint32, np.int64]),
       st.integers(0, 15), st.integers(0, 15), st.booleans(), st.integers(0, 2**32 - 1))
def test_memtis_cool_is_the_numpy_passes(nh, clock, dtype, hot_thr, bp_active, track,
                                         seed):
    """MEMTIS's huge-page cooling in one pass equals the numpy passes it replaced:
    get_idx by frexp, the hot row sums, may_hot, the halving, pclk and the kept bins
    moved by two full `cooled_bins` counts."""
    from tierlab.policies.memtis import get_idx
    hp, nb = 8, 16
    rng = np.random.default_rng(seed)
    n = (nh + 3) * hp
    cnt = (rng.integers(0, 2**32, n) >> rng.integers(0, 32, n)).astype(dtype)
    cnt[rng.random(n) < 0.4] = 0  # most subpages of a run are never sampled
    pclk = rng.integers(0, clock + 3, n).astype(np.int32)
    may_hot = rng.random(n) < 0.5
    hs = np.sort(rng.choice(nh + 3, nh, replace=False)).astype(np.int64)
    d = np.minimum(rng.integers(0, 70, nh), 62)
    ebins = cooled_bins(cnt, pclk, clock, 62, nb) if track else None
    want_cnt, want_pclk, want_hot = cnt.copy(), pclk.copy(), may_hot.copy()
    idx = hs[:, None] * hp + np.arange(hp)
    c = cnt[idx].astype(np.int64)
    pb = get_idx(c)
    hot = pb >= hot_thr
    want_hot[idx] = pb >= bp_active
    want_cnt[idx] = np.right_shift(c, d[:, None])
    want_pclk[idx] = clock
    want_sq = (c.astype(float) ** 2).sum(axis=1)
    hu, refs, sq = memtis_cool(hs, d, hp, cnt, pclk, may_hot, ebins, hot_thr, bp_active,
                               clock, 62, nb)
    np.testing.assert_array_equal(sq, want_sq)
    np.testing.assert_array_equal(hu, hot.sum(axis=1))
    np.testing.assert_array_equal(refs, np.where(hot, c, 0).sum(axis=1))
    np.testing.assert_array_equal(cnt, want_cnt)
    np.testing.assert_array_equal(pclk, want_pclk)
    np.testing.assert_array_equal(may_hot, want_hot)
    if track:
        np.testing.assert_array_equal(ebins, cooled_bins(cnt, pclk, clock, 62, nb))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 200), st.integers(0, 40), st.sampled_from([np.uint32, np.int64]),
       st.booleans(), st.integers(0, 2**32 - 1))
def test_set_counts_moves_the_kept_bins(n, clock, dtype, track, seed):
    """cnt[pages] = new with the kept bins moved page by page: the bins are
    `cooled_bins` of the whole array after the write."""
    rng = np.random.default_rng(seed)
    npages = 300
    cnt = (rng.integers(0, 2**31, npages) >> rng.integers(0, 31, npages)).astype(dtype)
    pclk = rng.integers(0, clock + 3, npages).astype(np.int32)
    pages = rng.choice(npages, min(n, npages), replace=False)
    new = rng.integers(0, 2**31, pages.size) >> rng.integers(0, 31, pages.size)
    ebins = cooled_bins(cnt, pclk, clock, 62, 16) if track else None
    want = cnt.copy()
    want[pages] = new
    set_counts(cnt, pclk, pages, new, clock, 62, 16, ebins)
    np.testing.assert_array_equal(cnt, want)
    if track:
        np.testing.assert_array_equal(ebins, cooled_bins(cnt, pclk, clock, 62, 16))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 12), st.integers(0, 40), st.integers(0, 2**32 - 1))
def test_split_bins_is_the_chunked_numpy_histogram(nsp, clock, seed):
    """The split huge pages' base pages binned by get_idx of their cooled counts:
    unallocated pages and the pages past the last (a partial huge page) left out."""
    from tierlab.policies.hemem import halve
    from tierlab.policies.memtis import get_idx
    rng = np.random.default_rng(seed)
    hp, nh = 8, 14
    npages = nh * hp - int(rng.integers(0, hp))
    cnt = (rng.integers(0, 2**32, nh * hp) >> rng.integers(0, 32, nh * hp)).astype(np.uint32)
    pclk = rng.integers(0, clock + 3, nh * hp).astype(np.int32)
    node = rng.choice(np.array([0, 1, 255], np.uint8), npages)
    sp = np.sort(rng.choice(nh, min(nsp, nh), replace=False)).astype(np.int64)
    bp = (sp[:, None] * hp + np.arange(hp)).ravel()
    bp = bp[bp < npages]
    bp = bp[node[bp] != 255]
    want = np.bincount(get_idx(halve(cnt[bp], pclk[bp], clock)), minlength=16)[:16]
    got = memtis.split_bins(cnt, pclk, node, sp, hp, 255, clock, 62, 16)
    np.testing.assert_array_equal(got, want)


def test_memtis_cool_squares_at_512_subpages():
    """The squares' sum of 512-subpage rows is numpy's pairwise float sum, both where
    the integer sum is below 2^53 (summed in the pass) and where it is not (numpy's):
    rows of small, near-2^22, near-2^26 and up to 2^32 counts."""
    hp, rows = 512, 24
    rng = np.random.default_rng(11)
    tops = [2**10, 2**22, 2**22 + 2**21, 2**26, 2**32 - 1, 2**20] * 4
    cnt = np.concatenate([rng.integers(0, t, hp) for t in tops]).astype(np.uint32)
    c = cnt.reshape(rows, hp).astype(np.int64)
    want = (c.astype(float) ** 2).sum(axis=1)
    exact = want < 2**53
    assert exact.any() and not exact.all()
    pclk = np.zeros(cnt.size, np.int32)
    _, _, sq = memtis_cool(np.arange(rows), np.ones(rows, np.int64), hp, cnt, pclk,
                           np.zeros(cnt.size, bool), None, 3, 3, 1, 62, 16)
    np.testing.assert_array_equal(sq, want)


def _move_numpy(node_map, blocks, used, pages, cur, dsts, block):
    """Memory.move as numpy wrote it: scatter, bincounts per node and per block."""
    k = used.shape[0]
    node_map[pages] = dsts
    used += np.bincount(dsts, minlength=256)[:k] - np.bincount(cur, minlength=256)[:k]
    b = (pages // block) * k
    m = blocks.size
    blocks += (np.bincount(b + dsts, minlength=m)
               - np.bincount(b + cur, minlength=m)).reshape(-1, k).astype(np.int32)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3000), st.integers(0, 2**32 - 1), st.booleans())
def test_move_pages_is_the_numpy_bookkeeping(npages, seed, with_bits):
    rng = np.random.default_rng(seed)
    k, block = 4, 64
    node_map = rng.integers(0, k, npages).astype(np.uint8)
    node_map[rng.random(npages) < 0.2] = 255
    nb = -(-npages // block)
    blocks = np.zeros((nb, k), np.int32)
    for n in range(k):
        blocks[:, n] = np.bincount(np.flatnonzero(node_map == n) // block, minlength=nb)
    used = np.bincount(node_map[node_map < k], minlength=k).astype(np.int64)
    placed = np.flatnonzero(node_map < k)
    pages = rng.permutation(placed)[: rng.integers(0, len(placed) + 1)].astype(np.int64)
    cur = node_map[pages]
    dsts = ((cur + rng.integers(1, k, len(pages))) % k).astype(np.uint8)
    want = [a.copy() for a in (node_map, blocks, used)]
    _move_numpy(*want, pages, cur, dsts, block)
    bits = NodeBits(node_map, k) if with_bits else None
    move_pages(node_map, bits.bits if bits else None, blocks, used, pages, cur, dsts, block)
    for got, exp in zip((node_map, blocks, used), want):
        np.testing.assert_array_equal(got, exp)
    if bits:
        np.testing.assert_array_equal(bits.bits, NodeBits(node_map, k).bits)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 2000), st.integers(0, 2**32 - 1), st.booleans(), st.booleans(),
       st.sampled_from([None, True, False]))
def test_set_active_is_the_numpy_flag_update(npages, seed, on, with_row, sel_val):
    from tierlab.engine.lru import ACTIVE, PROMOTE, REFERENCED
    rng = np.random.default_rng(seed)
    k = 3
    node_map = rng.integers(0, k, npages).astype(np.uint8)
    node_map[rng.random(npages) < 0.2] = 255
    flags = rng.integers(0, 8, npages).astype(np.uint8)
    nr = rng.integers(0, 1000, k).astype(np.int64)
    pages = rng.integers(0, npages, rng.integers(0, 2 * npages)).astype(np.int64)  # repeats
    sel = None if sel_val is None else rng.random(len(pages)) < 0.5
    todo = pages if sel is None else pages[sel == sel_val]
    # the numpy form LRU._set_active had, on the pages selected
    f = flags[todo]
    change = todo[((f & ACTIVE) != 0) != on]
    nodes = node_map[change]
    change, nodes = change[nodes != 255], nodes[nodes != 255]
    want_nr = nr + (1 if on else -1) * np.bincount(nodes, minlength=256)[:k]
    want = flags.copy()
    if on:
        want[change] |= ACTIVE
    else:
        want[change] &= ~np.uint8(ACTIVE | PROMOTE)
    want[change] &= ~np.uint8(REFERENCED)
    row = PageBits((flags & ACTIVE) != 0) if with_row else None
    keep = ~np.uint8(REFERENCED) if on else ~np.uint8(ACTIVE | PROMOTE | REFERENCED)
    n = set_active(flags, node_map, pages, on, ACTIVE, ACTIVE if on else 0, keep, nr,
                   row.words if row else None, sel, bool(sel_val))
    assert n == len(todo)
    np.testing.assert_array_equal(flags, want)
    np.testing.assert_array_equal(nr, want_nr)
    if row:
        exp = PageBits((want & ACTIVE) != 0).words
        np.testing.assert_array_equal(row.words, exp)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3000), st.integers(0, 2**32 - 1), st.integers(1, 255))
def test_relocate_sums_is_the_numpy_bincounts(npages, seed, stamp):
    from tierlab.field import RateField
    rng = np.random.default_rng(seed)
    k = 4
    cuts = np.unique(rng.integers(0, npages + 1, 2 * rng.integers(1, 20)))
    if len(cuts) % 2:
        cuts = cuts[:-1]
    starts, ends = cuts[0::2], cuts[1::2]  # segments with gaps (rate 0) between
    f = RateField(starts, ends, rng.random(len(starts)) * 1e-3,
                  rng.random(len(starts)) * 1e-4, npages)
    pages = rng.permutation(npages)[: rng.integers(0, npages + 1)].astype(np.int64)
    if rng.random() < 0.5:
        pages.sort()
    cur = rng.integers(0, k, len(pages)).astype(np.uint8)
    dsts = ((cur + rng.integers(1, k, len(pages))) % k).astype(np.uint8)
    rank = rng.permutation(k).astype(np.int64)
    epoch = rng.integers(0, 256, npages).astype(np.uint8)
    want_epoch = epoch.copy()
    r, w = f.rate_of(pages)
    up = rank[dsts] < rank[cur]
    st_ = want_epoch[pages[up]]
    want_pp = int(((st_ != 0) & (((stamp - st_) % 255) <= 1)).sum())
    want_epoch[pages[~up]] = stamp
    sums, counts, npro, pp = relocate_sums(pages, cur, dsts, f, rank, epoch, stamp)
    for row, (idx, wt) in enumerate(((dsts, r), (cur, r), (dsts, w), (cur, w))):
        np.testing.assert_array_equal(sums[row], np.bincount(idx, wt, 256))
    np.testing.assert_array_equal(counts[0], np.bincount(cur, minlength=256))
    np.testing.assert_array_equal(counts[1], np.bincount(dsts, minlength=256))
    assert (npro, pp) == (int(up.sum()), want_pp)
    np.testing.assert_array_equal(epoch, want_epoch)



@settings(max_examples=40, deadline=None)
@given(st.integers(1, 2000), st.integers(0, 2**32 - 1))
def test_move_counts_is_the_numpy_bincounts(npages, seed):
    rng = np.random.default_rng(seed)
    k = 4
    flags = rng.integers(0, 8, npages).astype(np.uint8)
    pages = rng.permutation(npages)[: rng.integers(0, npages + 1)].astype(np.int64)
    cur = rng.integers(0, k, len(pages)).astype(np.uint8)
    dsts = rng.integers(0, k, len(pages)).astype(np.uint8)
    nr = rng.integers(0, 10_000, k).astype(np.int64)
    act = (flags[pages] & 1) != 0
    want = nr - np.bincount(cur[act], minlength=256)[:k] \
        + np.bincount(dsts[act], minlength=256)[:k]
    move_counts(flags, 1, pages, cur, dsts, nr)
    np.testing.assert_array_equal(nr, want)


@settings(max_examples=80, deadline=None)
@given(st.lists(arrays(np.float64, st.integers(0, 300), elements=few.filter(lambda x: x == x)),
                max_size=9), st.booleans())
def test_runs_order_is_numpys_stable_argsort(parts, sort_parts):
    """The natural merge sort (the poll's order) on any keys, sorted runs or not."""
    keys = np.concatenate([np.sort(p) if sort_parts else p for p in parts] or [np.zeros(0)])
    runs_order = jit.compiled(structures._runs_order) if jit.numba_jit() else \
        structures._runs_order
    np.testing.assert_array_equal(runs_order(keys),
                                  np.argsort(keys, kind="stable"))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2000), st.integers(2, 40), st.integers(0, 2**31 - 1))
def test_poll_faults_is_the_timeline_inverse_and_a_stable_sort(n, nb, seed):
    """Times, order, latencies and cleared flags as numpy computes them from the whole
    timeline (Timeline.time_at_work), whatever breakpoint the search starts from."""
    from tierlab.engine.timeline import Timeline
    rng = np.random.default_rng(seed)
    tl = Timeline(field=None)
    t = w = 0.0
    for _ in range(nb):  # flat pieces (stalls) included
        t += float(rng.exponential())
        w += float(rng.exponential()) * float(rng.random() < 0.7)
        tl.advance(t, w)
    ta, wa = tl.breakpoints()
    lo = int(rng.integers(0, ta.shape[0]))
    parts = [np.sort(rng.uniform(wa[lo], w * 1.01 + 1e-9, int(rng.integers(0, n + 1))))
             for _ in range(int(rng.integers(1, 5)))]
    if rng.random() < 0.3:  # works at or below the start breakpoint: the whole search
        parts.append(np.sort(rng.uniform(-1.0, wa[lo] + 1e-9, 50)))
    works = np.concatenate(parts)
    works[rng.random(works.shape[0]) < 0.05] = wa[min(lo + 1, wa.shape[0] - 1)]
    arm_t = np.sort(rng.uniform(0, t, 16))
    arm = rng.integers(0, 16, works.shape[0]).astype(np.uint32)
    pages = rng.permutation(10_000)[: works.shape[0]].astype(np.int32)
    flag = np.zeros(10_000, dtype=bool)
    flag[pages] = True
    flag[rng.integers(0, 10_000, 100)] = True  # armed pages that did not fault
    bits = structures.PageBits(flag)
    now = float(rng.uniform(0, t * 1.1))
    out = hint_faults.poll_faults(pages, works, arm, arm_t, ta, wa, lo, now,
                              bits.words.copy())
    if works.shape[0] == 0:
        assert out is None
        return
    times = np.minimum(np.maximum(tl.time_at_work(works), arm_t[arm]), now)
    order = np.argsort(times, kind="stable")
    bits2 = structures.PageBits(flag)
    p, tt, lat = hint_faults._poll_faults(pages, works, arm, arm_t, ta, wa, lo, now,
                                                bits2.words)[:3]
    np.testing.assert_array_equal(p, pages[order].astype(np.int64))
    np.testing.assert_array_equal(tt, times[order])
    np.testing.assert_array_equal(lat, np.maximum(times[order] - arm_t[arm[order]], 0.0))
    flag[pages] = False
    np.testing.assert_array_equal(bits2.get(np.arange(10_000)), flag)
    np.testing.assert_array_equal(out[0], p)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3000), st.integers(0, 30), st.integers(0, 2**31 - 1))
def test_range_movable_and_fill_ranges_are_the_page_list_forms(npages, nranges, seed):
    """Disjoint ranges in any order: the movable pages and nodes of `_movable` on
    `range_pages`, and the same writes as a fancy-indexed assignment."""
    from tierlab.field import range_pages
    rng = np.random.default_rng(seed)
    node = rng.choice(np.array([0, 1, 2, 255], dtype=np.uint8), npages)
    cuts = np.unique(rng.integers(0, npages + 1, 2 * nranges))
    s, e = cuts[:-1:2], cuts[1::2]
    m = min(len(s), len(e))
    s, e = s[:m], e[:m]
    order = rng.permutation(m)
    s, e = s[order], e[order]
    assert pagemap.disjoint_ranges(s, e)
    dst = int(rng.integers(0, 3))
    pages = range_pages(s, e)
    cur = node[pages]
    keep = (cur != 255) & (cur != dst)
    p, c = pagemap.range_movable(node, s, e, dst)
    np.testing.assert_array_equal(p, pages[keep])
    np.testing.assert_array_equal(c, cur[keep])
    a, b = np.zeros(npages, np.uint8), np.zeros(npages, np.uint8)
    a[pages] = 7
    pagemap.fill_ranges(b, s, e, 7)
    np.testing.assert_array_equal(a, b)
    if m > 1:
        assert not pagemap.disjoint_ranges(np.append(s, s[0]), np.append(e, e[0]))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 400), st.integers(0, 2**31 - 1))
def test_draw_pairs_and_slow_hits_are_the_numpy_forms(nreg, seed):
    """IDT's sampled pages (the same draws from the generator) and the accessed regions
    off the top node (all, or those IDT demoted), their pages charged to the awaiting
    decisions named by `by` and `dec` at their middle pages, and the lead that fits in
    `room`, as numpy computes them."""
    rng = np.random.default_rng(seed)
    s = np.sort(rng.choice(10_000, nreg, replace=False)).astype(np.int64)
    e = np.minimum(s + rng.integers(1, 300, nreg), np.append(s[1:], 10_000))
    e = np.maximum(e, s + 1)
    g1, g2 = np.random.default_rng(seed), np.random.default_rng(seed)
    u = g2.random((2, nreg))
    u *= (e - s).astype(float)
    out = np.minimum(u.astype(np.int64) + s, e - 1).reshape(-1)
    np.testing.assert_array_equal(idt_regions.draw_pairs(g1, s, e), out)
    assert g1.random() == g2.random()
    node = rng.choice(np.array([0, 1, 2, 255], dtype=np.uint8), 10_300)
    acc = rng.random(nreg) < 0.5
    by = np.where(rng.random(10_300) < 0.5, 0, rng.integers(1, 4, 10_300)).astype(np.uint8)
    dec = rng.integers(0, 256, 10_300).astype(np.uint8)
    mid = (s + e - 1) // 2
    size = e - s
    keys = [0 * 256 + 7, 2 * 256 + 3, 1 * 256 + 200]
    dec[mid[:nreg // 2]] = rng.choice([7, 3, 200], nreg // 2)  # some awaiting decisions
    room = int(np.median(size)) if nreg else 0
    for only in (True, False):
        got = idt_policy.slow_hits(acc, s, e, node, 1, by, dec, only, keys, room)
        j = np.flatnonzero(acc & (node[mid] != 1) & (node[mid] != 255) &
                           ((by[mid] > 0) | (not only)))
        key = np.where(by[mid[j]] > 0, (by[mid[j]].astype(int) - 1) * 256 + dec[mid[j]], -1)
        over = np.flatnonzero(size[j] > room)
        want = (j, int(size[j].sum()), [int(size[j][key == k].sum()) for k in keys],
                int(over[0]) if over.size else j.size)
        np.testing.assert_array_equal(got[0], want[0])
        assert (got[1], got[2].tolist(), got[3]) == want[1:]
        numpy_form = idt_policy._slow_hits_numpy(acc, s, e, node, 1, by, dec, only,
                                              np.array(keys), room)
        np.testing.assert_array_equal(numpy_form[0], want[0])
        assert (numpy_form[1], list(numpy_form[2]), numpy_form[3]) == want[1:]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 4), st.integers(0, 2**31 - 1))
def test_bisect_throughput_compiled_is_the_python_bisection(k, seed):
    """The closed loop's root, compiled, to the last bit of the Python loop it was."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(0, 500, k)
    b = rng.uniform(0, 0.9, k)
    c = rng.uniform(0, 1e-9, k) * (rng.random(k) < 0.8)
    cap = min([(1.0 - b[i]) / c[i] for i in range(k) if c[i] > 0], default=np.inf)
    args = (a, b, c, float(rng.uniform(1, 50)), float(rng.uniform(1, 10)),
            float(rng.uniform(1, 64)), float(cap))
    assert throughput.bisect_throughput(*args) == throughput._bisect_throughput.py(*args)


def _block_counts(node, block, nnodes=3):
    """`Memory.blocks` of a page map: pages per node in each `block` addresses."""
    nb = -(-node.shape[0] // block)
    pad = np.full(nb * block, 255, np.uint8)
    pad[:node.shape[0]] = node
    return np.stack([(pad.reshape(nb, block) == k).sum(axis=1) for k in range(nnodes)],
                    axis=1).astype(np.int32)


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 5000), st.integers(0, 12), st.integers(0, 2**31 - 1))
def test_range_node_counts_and_pages_not_on_read_the_page_map(npages, nranges, seed):
    """Per-range node counts as the numpy bincounts give them, and the allocated pages
    off each range's node, range then address order (the blocks only skip reads)."""
    from tierlab.field import range_node_counts_numpy
    rng = np.random.default_rng(seed)
    node = rng.choice(np.array([0, 1, 2, 255], dtype=np.uint8), npages,
                      p=[0.5, 0.2, 0.1, 0.2])
    node[: int(rng.integers(0, npages))] = 0  # long runs on one node: blocks skipped
    s = rng.integers(0, npages, nranges)
    e = np.minimum(s + rng.integers(0, 2000, nranges), npages)
    np.testing.assert_array_equal(field.range_node_counts(node, s, e, 3),
                                  range_node_counts_numpy(node, s, e, 3))
    block = 64
    blocks = _block_counts(node, block)
    d = rng.integers(0, 3, nranges)
    want_p, want_r = [], []
    for i in range(nranges):
        idx = np.arange(s[i], e[i])
        v = node[idx]
        ok = (v != 255) & (v != d[i])
        want_p.append(idx[ok])
        want_r.append(np.full(int(ok.sum()), i))
    p, r = pagemap.pages_not_on(node, blocks, s.astype(np.int64), e.astype(np.int64),
                                d.astype(np.int64), block)
    np.testing.assert_array_equal(p, np.concatenate(want_p or [np.zeros(0, int)]))
    np.testing.assert_array_equal(r, np.concatenate(want_r or [np.zeros(0, int)]))


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 5000), st.integers(0, 2), st.integers(0, 2**31 - 1))
def test_pages_by_byte_is_the_stable_argsort_of_the_nodes_pages(npages, node_id, seed):
    """AutoTiering's LAP list: the node's pages stably sorted by lut[byte], as numpy's
    stable argsort over flatnonzero orders them, with the node's pages dense or sparse
    and map lengths not a multiple of the 8-byte words; a page map that disagrees with its
    block counts is an error, not a short list."""
    rng = np.random.default_rng(seed)
    node = rng.choice(np.array([0, 1, 2, 255], dtype=np.uint8), npages,
                      p=[0.4, 0.3, 0.1, 0.2])
    node[: int(rng.integers(0, npages))] = 1  # long runs off the node: blocks skipped
    # sparse pages of the node: most 8-byte words of the map hold none (skipped)
    node[(rng.random(npages) < rng.choice([0.0, 0.9, 0.995])) & (node == node_id)] = 255
    byte = rng.integers(0, 256, npages, dtype=np.uint8)
    lut = rng.integers(0, 18, 256).astype(np.uint8)
    block = int(rng.choice([8, 64, 512]))
    blocks = _block_counts(node, block)
    pages = np.flatnonzero(node == node_id)
    want = pages[np.argsort(lut[byte[pages]], kind="stable")]
    got = pagemap.pages_by_byte(node, blocks, block, node_id, byte, lut)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == np.int32  # 4 bytes a page below 2^31 pages
    buf = np.full(pages.shape[0] + 3, -1, np.int32)  # reused: its prefix is the list
    again = pagemap.pages_by_byte(node, blocks, block, node_id, byte, lut, buf)
    np.testing.assert_array_equal(again, want)
    assert again.base is buf and (buf[pages.shape[0]:] == -1).all()
    wide = np.full(pages.shape[0], -1, np.int64)  # another type: not written
    np.testing.assert_array_equal(pagemap.pages_by_byte(node, blocks, block, node_id, byte,
                                                        lut, wide), want)
    assert (wide == -1).all()
    if pages.shape[0]:
        blocks[pages[0] // block, node_id] += 1
        with pytest.raises(RuntimeError, match="block counts"):
            pagemap.pages_by_byte(node, blocks, block, node_id, byte, lut)


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 400), st.booleans(), st.integers(0, 2**31 - 1))
def test_spend_budgets_is_the_numpy_epoch_step(n, per_page, seed):
    """A lazy first-access epoch in one pass: the same hits, budgets and remainders
    (bit for bit) as the numpy passes it replaced, with zero rates, spent (inf) and
    NaN budgets among the pages."""
    rng = np.random.default_rng(seed)
    rate = rng.choice([0.0, 1e-9, 0.5, 2.0, 1e6], n) * rng.random(n)
    rem = rng.exponential(size=n)
    rem[rng.random(n) < 0.1] = np.inf
    rem[rng.random(n) < 0.05] = np.nan
    rem[rng.random(n) < 0.05] = 0.0
    dw = rng.random(n if per_page else 1) * 3
    want = rem.copy()
    lam = rate * dw
    hit = np.flatnonzero(lam >= want)
    hit = hit[rate[hit] > 0]
    left = want[hit].copy()
    want[hit] = np.inf
    want -= lam
    got_hit, got_left = draws.spend_budgets(rate, dw, rem)
    np.testing.assert_array_equal(got_hit, hit)
    np.testing.assert_array_equal(got_left, left)
    np.testing.assert_array_equal(rem, want)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 300), st.integers(-5, 200), st.integers(0, 2**31 - 1))
def test_halve_at_is_hemems_lazy_cooling_written_back(n, clock, seed):
    """HeMem's lazy halving in one pass: `hemem.halve` of reads and writes, written back
    with the clock, for repeated pages, clocks behind a page's and shifts past 62."""
    from tierlab.policies.hemem import MAX_SHIFT, halve
    rng = np.random.default_rng(seed)
    nh = 50
    reads = rng.integers(0, 2**62, nh)
    writes = rng.integers(0, 1000, nh)
    clk = rng.integers(-100, 150, nh)
    hps = rng.integers(0, nh, n)
    want_r, want_w = halve(reads[hps], clk[hps], clock), halve(writes[hps], clk[hps], clock)
    wr, ww, wc = reads.copy(), writes.copy(), clk.copy()
    wr[hps], ww[hps], wc[hps] = want_r, want_w, clock
    r, w = hemem.halve_at(reads, writes, clk, hps, clock, MAX_SHIFT)
    np.testing.assert_array_equal(r, want_r)
    np.testing.assert_array_equal(w, want_w)
    np.testing.assert_array_equal(reads, wr)
    np.testing.assert_array_equal(writes, ww)
    np.testing.assert_array_equal(clk, wc)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 300), st.integers(0, 100), st.booleans(), st.integers(0, 2**31 - 1))
def test_tier_shares_is_colloids_numpy_view(nh, clock, down, seed):
    """Colloid on HeMem: every tracked page cooled, and the two tiers' pages with their
    shares, bit for bit as the numpy code (halve, a float sum, a division) gave them:
    the sources of positive share in index order with their stable argsort, the
    partners (of positive share going down) in their stable argsort's order; counts
    past the counting sort's table (reads up to 2^40) sorted by numpy."""
    from tierlab.policies.hemem import DRAM, MAX_SHIFT, NONE, NVM, halve
    rng = np.random.default_rng(seed)
    tier = rng.choice(np.array([NONE, DRAM, NVM], dtype=np.uint8), nh)
    reads = rng.integers(0, 2**40 if seed % 3 == 0 else 30, nh)
    writes = rng.integers(0, 50, nh)
    writes[rng.random(nh) < 0.3] = 0
    reads[rng.random(nh) < 0.3] = 0
    if nh % 7 == 0:  # no counts at all: no shares, and no division by zero
        reads[:], writes[:] = 0, 0
    clk = rng.integers(0, 120, nh)
    src_tier, dst_tier = (DRAM, NVM) if down else (NVM, DRAM)
    live = np.flatnonzero(tier != NONE)
    r, w = halve(reads[live], clk[live], clock), halve(writes[live], clk[live], clock)
    count = (r + w).astype(float)
    wr, ww, wc = reads.copy(), writes.copy(), clk.copy()
    wr[live], ww[live], wc[live] = r, w, clock
    shares = colloid.TierShares()
    for _ in range(2):  # the kept arrays reused
        total, src, p_src, src_up, dst, p_dst = shares(
            tier, reads.copy(), writes.copy(), clk.copy(), clock, MAX_SHIFT, NONE,
            src_tier, dst_tier, zero_partners=not down)
    total, src, p_src, src_up, dst, p_dst = shares(
        tier, reads, writes, clk, clock, MAX_SHIFT, NONE, src_tier, dst_tier,
        zero_partners=not down)
    assert total == count.sum()
    np.testing.assert_array_equal(reads, wr)
    np.testing.assert_array_equal(writes, ww)
    np.testing.assert_array_equal(clk, wc)
    share = np.zeros(nh)
    if total > 0:
        share[live] = count / count.sum()
    want_src = np.flatnonzero((tier == src_tier) & (share > 0))
    np.testing.assert_array_equal(src, want_src)
    np.testing.assert_array_equal(p_src, share[want_src])
    np.testing.assert_array_equal(src_up, np.argsort(share[want_src], kind="stable"))
    part = np.flatnonzero((tier == dst_tier) & ((share > 0) | (not down)))
    part = part[np.argsort(share[part], kind="stable")]
    np.testing.assert_array_equal(dst, part)
    np.testing.assert_array_equal(p_dst, share[part])


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 3000), st.integers(1, 400), st.integers(0, 2**31 - 1))
def test_draw_below_is_the_draw_of_every_page(n, nvals, seed):
    """The draws against 1 - exp(-lam) with expm1 taken once for equal values, once
    per run, or by numpy from where the values change too often, are those with expm1
    taken per page, bit for bit: one value, runs, long runs then changes at every page,
    zeros and both signs of zero."""
    rng = np.random.default_rng(seed)
    vals = np.concatenate(([0.0, -0.0], -rng.random(nvals) * rng.choice([1e-6, 1.0, 40.0])))
    if rng.random() < 0.4:  # one value, or only zeros of both signs
        lam = rng.choice(vals[:2] if rng.random() < 0.2 else vals[2:3], n)
    elif rng.random() < 0.5:
        m = max(n // int(rng.integers(1, 50)), 1)  # runs
        lam = np.repeat(rng.choice(vals, m), rng.integers(1, 60, m))[:n]
    else:  # long runs, then values changing at every page (numpy takes over)
        k = int(rng.integers(0, n + 1))
        lam = np.concatenate((np.repeat(rng.choice(vals, 4), -(-k // 4))[:k],
                              rng.choice(vals, n - k)))
    u = rng.random(lam.shape[0])
    want = u < -np.expm1(lam)
    got = np.zeros(lam.shape[0], bool)
    draws.draw_below(u, lam.copy(), got)
    np.testing.assert_array_equal(got, want)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 300), st.integers(0, 2**31 - 1))
def test_draw_below_decides_at_its_edges_as_expm1(n, seed):
    """Draws placed on 1 - exp(-m) itself and the next doubles either side of it, for
    m from 1e-300 to 1e3, 0, 1 and inf, each value's draws one run (expm1 once a run):
    the same bits as libm's expm1 value by value (numpy's differs from it by an ulp for
    some values where numpy dispatches expm1 to AVX-512, and these draws sit on the
    ulp)."""
    rng = np.random.default_rng(seed)
    m = np.concatenate(([0.0, 1.0, np.inf, 1e-300, 2.0],
                        10.0 ** rng.uniform(-300, 3, n)))
    m = m[rng.permutation(m.shape[0])]
    c = -np.expm1(-m)
    u = np.concatenate([np.stack([c, np.nextafter(c, 0), np.nextafter(c, 1)]),
                        rng.random((37, m.shape[0]))])
    lam = np.broadcast_to(-m, u.shape).T.ravel()  # runs of 40
    u = np.clip(u.T.ravel(), 0.0, np.nextafter(1.0, 0))
    got = np.zeros(u.shape[0], bool)
    draws.draw_below(u, lam.copy(), got)
    np.testing.assert_array_equal(got, u < -np.array([math.expm1(x) for x in lam]))


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 500), st.sampled_from(["ascending", "random", "runs"]), st.booleans(),
       st.integers(0, 2**31 - 1))
def test_sub_expected_is_the_searchsorted_form(n, order, use_max, seed):
    """Each page's row found by galloping from the previous page's (pages in ascending
    order, in random order, in ascending runs that restart): the row
    searchsorted(starts, p, "right") gives, and the same expected accesses."""
    from tierlab.field import RateField
    from tierlab.monitors.source import _FieldTables
    rng = np.random.default_rng(seed)
    npages = 5000
    cuts = np.unique(rng.integers(0, npages + 1, 2 * int(rng.integers(0, 400))))
    s, e = cuts[:-1:2], cuts[1::2]
    m = min(len(s), len(e))
    t = _FieldTables(RateField(s[:m], e[:m], rng.random(m), rng.random(m), npages))
    pages = rng.integers(0, npages, n)
    if order == "ascending":
        pages = np.sort(pages)
    elif order == "runs":
        pages = np.concatenate([np.sort(x) for x in np.array_split(pages, 5)])
    which = rng.integers(0, 4, n)
    w_tab, w_a, whi = rng.random(4) * 10, float(rng.random() * 10), float(rng.random() * 20)
    got = np.empty(n)
    draws.sub_expected(got, pages, which, False, w_tab, t.starts, t.rate["all"], t.E,
                         w_a, use_max, whi, init=True)
    row = np.searchsorted(t.starts, pages, side="right")
    r = t.rate["all"][row] * np.where(pages < t.E[row], 1.0, 0.0)
    w0 = w_tab[which]
    wlo = np.maximum(w0, w_a) if use_max else w0
    np.testing.assert_array_equal(got, 0.0 - r * np.maximum(whi - wlo, 0.0))


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 500), st.integers(2, 5), st.booleans(), st.integers(0, 2**31 - 1))
def test_sub_expected_eps_is_one_pass_per_epoch(n, ne, by_page, seed):
    """Every epoch in one pass: the same bits as sub_expected epoch after epoch."""
    from tierlab.field import RateField
    from tierlab.monitors.source import _FieldTables
    rng = np.random.default_rng(seed)
    npages = 1000
    tabs = []
    for _ in range(ne):
        cuts = np.unique(rng.integers(0, npages + 1, 2 * int(rng.integers(0, 8))))
        s, e = cuts[:-1:2], cuts[1::2]
        m = min(len(s), len(e))
        f = RateField(s[:m], e[:m], rng.random(m), rng.random(m), npages)
        tabs.append(_FieldTables(f))
    pages = rng.integers(0, npages, n)
    which = rng.integers(0, 4, npages if by_page else n)
    w_tab = rng.random(4) * 10
    w_a, use_max, whi = rng.random(ne) * 10, rng.random(ne) < 0.5, rng.random(ne) * 20
    want = np.empty(n)
    for k, t in enumerate(tabs):
        draws.sub_expected(want, pages, which, by_page, w_tab, t.starts, t.rate["all"],
                             t.E, w_a[k], bool(use_max[k]), whi[k], init=k == 0)
    cat = (np.concatenate([t.starts for t in tabs]),
           np.cumsum([0] + [t.starts.shape[0] for t in tabs]).astype(np.int64),
           np.concatenate([t.rate["all"] for t in tabs]), np.concatenate([t.E for t in tabs]))
    got = np.empty(n)
    draws.sub_expected_eps(got, pages, which, by_page, w_tab, cat, w_a, use_max, whi)
    np.testing.assert_array_equal(got, want)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5), st.integers(1, 4), st.integers(0, 2**32 - 1),
       st.lists(st.integers(0, 40), min_size=1, max_size=12))
def test_fault_calendar_hands_out_every_entry_once_by_bucket(nb, bsz, seed, sizes):
    """Pushes, bucket pops and window rolls in random order on a tiny calendar (chains
    of many blocks): every entry comes back exactly once with its work w0 + budget / r
    bit for bit (works of many exponents, whose top 16 bits the blocks keep), near
    entries at or before the current bucket, each popped bucket's entries inside it in
    insertion order among those of one key (so of equal works), the rest past the
    window; the blocks all return to the free stack, grown where the first window's
    buckets span many keys."""
    rng = np.random.default_rng(seed)
    npages = sum(sizes) + 1
    cal = structures.FaultCalendar(npages, np.int32, nb, bsz)  # window [0, 1)
    nblocks = cal.nfree[0]
    out_w, out_p = [], []
    next_page = 0
    w_now = 0.0
    want_w = np.full(npages, np.nan)
    for k in sizes:
        budget = rng.exponential(size=k) * rng.choice([1e-30, 0.1, 10.0, 1e3, 1e30])
        budget[rng.random(k) < 0.1] = np.nan
        r = rng.choice([0.5, 1.0, 3.0], size=k)
        pages = np.arange(next_page, next_page + k, dtype=np.int32)
        next_page += k
        w, p, a = cal.push(budget, r, w_now, pages, pages.astype(np.uint32))
        exp_w = w_now + budget / r
        want_w[pages] = exp_w
        with np.errstate(invalid="ignore"):
            assert np.all(cal.index(w) < cal.cur + 1)
        np.testing.assert_array_equal(w, exp_w[np.isin(pages, p)])
        assert np.all(np.diff(p) > 0)  # input order
        out_w.append(w)
        out_p.append(p)
        w_now += rng.exponential() * 30
        xw = cal.index(w_now)
        if not xw < cal.nb:
            for j in range(cal.cur + 1, cal.nb):
                w, p, a = cal.pop(j)
                out_w.append(w)
                out_p.append(p)
            w, p, a = cal.roll(w_now)
            assert np.all(w < w_now) and np.all(p.astype(np.uint32) == a)
            out_w.append(w)
            out_p.append(p)
            xw = cal.index(w_now)
        while cal.cur + 1 <= xw:
            cal.cur += 1
            w, p, a = cal.pop(cal.cur)
            key = w.view(np.uint64) >> np.uint64(48)  # a work's top 16 bits
            for k in np.unique(key):  # insertion order among the entries of one key
                assert np.all(np.diff(p[key == k]) > 0)
            x = cal.index(w)
            assert np.all((x >= cal.cur) & (x < cal.cur + 1))
            assert np.all(p.astype(np.uint32) == a)
            out_w.append(w)
            out_p.append(p)
    rest_w, rest_p, _ = cal.drain()
    assert len(cal) == 0 and cal.nfree[0] == cal.nxt.shape[0] >= nblocks
    pages = np.concatenate(out_p + [rest_p])
    assert np.array_equal(np.sort(pages), np.arange(next_page))
    np.testing.assert_array_equal(np.concatenate(out_w + [rest_w]), want_w[pages])
    # what was never handed out lies past the current bucket (or is NaN): not yet due
    with np.errstate(invalid="ignore"):
        assert not np.any(cal.index(rest_w) < cal.cur + 1)
        assert not np.any(rest_w <= w_now)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 300), st.integers(0, 300),
       st.integers(0, 300))
def test_page_bits_get_and_any_are_numpys(seed, n, a, b):
    """A bitmap's bits of listed pages and whether a range holds a set one, as the bool
    array it packs answers, across word boundaries and partial words."""
    rng = np.random.default_rng(seed)
    on = rng.random(n) < rng.choice([0.0, 0.01, 0.3])
    bits = structures.PageBits(on)
    pages = rng.integers(0, n, 50)
    np.testing.assert_array_equal(bits.get(pages), on[pages])
    start, end = min(a, b, n), min(max(a, b), n)
    assert bits.any(start, end) == bool(on[start:end].any())
    bits.clear(start, end)
    on[start:end] = False
    bits.set(pages[:5], True)
    on[pages[:5]] = True
    np.testing.assert_array_equal(bits.get(np.arange(n)), on)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([np.int32, np.int64]),
       st.sampled_from([40, 5000, 2**31 - 1]))
def test_page_map_is_a_dict(seed, pdt, span):
    """`PageMap` (NOMAD's shadowed pages) against a dict through puts, pops of present,
    absent and repeated pages, growth from 4 slots and a remap of the values: every
    lookup agrees, the count is the dict's, and a pop leaves no tombstone (every slot
    empty at the end). A narrow span of pages crowds the probe runs, which then wrap
    past the table's end."""
    rng = np.random.default_rng(seed)
    pm = structures.PageMap(pdt, np.int64, 4)
    ref: dict = {}
    for _ in range(12):
        cand = np.unique(rng.integers(0, span, int(rng.integers(0, 60))))
        new = np.array([c for c in cand.tolist() if c not in ref], dtype=np.int64)
        vals = rng.integers(0, 10**9, new.shape[0])
        pm.put(new, vals)
        ref.update(zip(new.tolist(), vals.tolist()))
        asked = rng.integers(0, span, 30)
        assert pm.get(asked).tolist() == [ref.get(int(x), -1) for x in asked]
        have = np.array(sorted(ref), dtype=np.int64)
        out = np.concatenate((rng.permutation(have)[:int(rng.integers(0, len(have) + 1))],
                              rng.integers(0, span, 5)))
        out = np.concatenate((out, out[:2]))  # a repeat: found once
        popped = pm.pop(out).tolist()
        assert popped == [ref.pop(int(x), -1) for x in out]
        assert len(pm) == len(ref) == int((pm.keys != -1).sum())
    full = pm.keys != -1
    assert dict(zip(pm.keys[full].tolist(), pm.vals[full].tolist())) == ref
    # values as entry indexes, renumbered as a compaction does
    pages = np.array(list(ref), dtype=np.int64)
    pm.pop(pages)
    assert len(pm) == 0 and np.all(pm.keys == -1)
    pm.put(pages, np.arange(len(pages)))
    new = rng.permutation(len(pages))
    pm.remap(new)
    assert pm.get(pages).tolist() == new.tolist()


def test_fault_calendar_keeps_works_bit_for_bit_through_a_grown_pool():
    """Works of every magnitude share blocks only with works of their top 16 bits and
    come back bit for bit; when the pool grows (`_reserve`), the blocks in use keep
    their entries and every block returns to the free stack."""
    rng = np.random.default_rng(7)
    cal = structures.FaultCalendar(900, np.int32, 1024, 8)
    cal.roll(1e3)  # a window [1e3, 1.6e4) whose buckets meet at most two keys each
    assert cal._tight
    budget = rng.exponential(size=900) * rng.choice([1e-300, 1.0, 1e3, 1e5, 1e300], 900)
    budget[::97] = np.inf
    pages = np.arange(900, dtype=np.int32)
    out = [cal.push(budget[:450], np.ones(450), 1e3, pages[:450],
                    pages[:450].astype(np.uint32))]
    used = np.setdiff1d(np.arange(cal.nxt.shape[0]), cal.free[:int(cal.nfree[0])])
    partial = used[cal.bfill[used] < cal.bsz]  # none left behind: only open blocks
    assert np.isin(partial, cal.opn[cal.opn >= 0]).all()
    before = cal.nxt.shape[0]
    cal._reserve(int(cal.nfree[0]) + 100)
    assert cal.nxt.shape[0] > before and cal.nfree[0] >= 100
    out.append(cal.push(budget[450:], np.ones(450), 1e3, pages[450:],
                        pages[450:].astype(np.uint32)))
    out.append(cal.drain())
    w = np.concatenate([x[0] for x in out])
    p = np.concatenate([x[1] for x in out])
    assert np.array_equal(np.sort(p), pages)
    np.testing.assert_array_equal(w.view(np.uint64), (1e3 + budget[p]).view(np.uint64))
    assert cal.nfree[0] == cal.nxt.shape[0]


def test_fault_calendar_widens_arm_indexes_past_two_bytes():
    """Arm indexes take 2 bytes until one does not fit: `fit_arm` widens them with the
    entries in place, and every entry comes back with its arm index, before and after
    (the narrow store would keep an index mod 65536)."""
    rng = np.random.default_rng(5)
    cal = structures.FaultCalendar(600, np.int32, 4, 8)
    assert cal.pa.dtype == np.uint16
    pages = np.arange(300, dtype=np.int32)
    arms = rng.integers(0, 65536, 300).astype(np.uint32)
    near = [cal.push(rng.exponential(size=300) * 10, np.ones(300), 0.0, pages, arms)]
    cal.fit_arm(65535)
    assert cal.pa.dtype == np.uint16
    cal.fit_arm(65536)
    assert cal.pa.dtype == np.uint32
    pages2 = np.arange(300, 600, dtype=np.int32)
    arms2 = rng.integers(65536, 2**32, 300).astype(np.uint32)
    near.append(cal.push(rng.exponential(size=300) * 10, np.ones(300), 0.0, pages2,
                         arms2))
    rest = cal.drain()
    p = np.concatenate([x[1] for x in near] + [rest[1]])
    a = np.concatenate([x[2] for x in near] + [rest[2]])
    assert np.array_equal(np.sort(p), np.arange(600))
    np.testing.assert_array_equal(a, np.concatenate((arms, arms2))[p])


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 300), st.integers(0, 300))
def test_scan_arm_is_the_numpy_scan_step(seed, a, b):
    """A scan step's range in one pass: the PTE slots walked (`pte_slots_walked`) and
    the pages newly armed (on no skipped node, not armed yet), flagged, as numpy finds
    them. Pages are unallocated in long runs, so some PTE tables are absent."""
    rng = np.random.default_rng(seed)
    n = 2000
    node = rng.choice(np.array([0, 1, 2, 255], np.uint8), n)
    node[rng.random(n // 100).repeat(100) < 0.4] = 255
    flag = rng.random(n) < 0.3
    skip = np.zeros(256, bool)
    skip[255] = True
    skip[rng.integers(0, 3)] = True
    start, end = sorted((5 * a, 5 * b + (seed % 7)))
    seg = node[start:end]
    want = np.flatnonzero(~skip[seg] & ~flag[start:end]) + start
    walked = hint_faults.pte_slots_walked(seg != 255, start)
    f2 = structures.PageBits(flag)
    out = np.empty(n, np.int32)
    w, k = hint_faults.scan_arm(node, start, end, skip, f2.words, 255, out)
    assert w == walked and k == want.shape[0]
    np.testing.assert_array_equal(out[:k], want)
    flag[want] = True
    np.testing.assert_array_equal(f2.get(np.arange(n)), flag)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 200))
def test_lru_mark_is_is_active_then_mark_accessed(seed, k):
    """A fault's LRU marks in one pass: which pages were active, and of the others the
    referenced ones activated and the rest made referenced, as the marks one page
    after another and then `set_active` of the listed pages make them: flags, counts
    and ACTIVE bitmap, with pages listed more than once and pages not allocated."""
    rng = np.random.default_rng(seed)
    flags = rng.integers(0, 8, 300).astype(np.uint8)
    node_map = rng.choice(np.array([0, 1, 2, 255], np.uint8), 300)
    pages = (rng.permutation(300)[:k] if seed % 2 else rng.integers(0, 300, k)).astype(
        np.int64)
    want, nr_want = flags.copy(), np.zeros(4, np.int64)
    act_want, listed = [], []
    for p in pages:  # lru_mark as it was: the marks in order, activations listed
        act_want.append(bool(want[p] & 1))
        if not want[p] & 1:
            if want[p] & 2:
                listed.append(p)
            else:
                want[p] |= 2
    listed = np.array(listed, np.int64)
    sel = listed[((want[listed] & 1) == 0) & (node_map[listed] != 255)]  # read before
    want[sel] = (want[sel] | 1) & ~np.uint8(2)
    np.add.at(nr_want, node_map[sel], 1)
    bits_want = PageBits((flags & 1) != 0)
    bits_want.set(sel, True)
    nr = np.zeros(4, np.int64)
    bits = PageBits((flags & 1) != 0)
    act = lru.lru_mark(flags, pages, 1, 2, node_map, nr, bits.words)
    np.testing.assert_array_equal(act, np.array(act_want, bool))
    np.testing.assert_array_equal(flags, want)
    np.testing.assert_array_equal(nr, nr_want)
    np.testing.assert_array_equal(bits.words, bits_want.words)
