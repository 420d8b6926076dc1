"""IDT's region monitor: the Fisher merge table, window counts, node-aware merging,
per-sample history in ring buffers of 1,024 bits, IDT's age rule, disagreement splits
(at the sampling interval, between the two sampled pages), the sampling-interval
subscribers, and a run under `static`."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import fisher_exact

import tierlab
from tierlab.errors import TierlabError
from tierlab.monitors import MONITORS
from tierlab.monitors.idt_regions import (IdtRegions, fisher_similar_table, hamming,
                                          history_distance, public_similar_table,
                                          window_counts)


def ring(rows, nbits=64):
    """Ring buffers of `nbits` bits whose newest bit sits at position 0, from rows of
    bits newest first (an int per row: bit k = the k-th newest sample); with newest =
    0 the k-th newest bit is at position -k mod nbits."""
    words = (nbits + 63) // 64
    h = np.zeros((len(rows), words), dtype=np.uint64)
    for i, v in enumerate(rows):
        for k in range(nbits):
            if (int(v) >> k) & 1:
                p = (-k) % nbits
                h[i, p // 64] |= np.uint64(1 << (p % 64))
    return h


@pytest.mark.parametrize("alpha", [0.10, 0.05, 0.20])
def test_fisher_table_matches_scipy_and_is_symmetric(alpha):
    """The exact-integer table is scipy's fisher_exact verdict for every pair of counts
    at every window length up to 16."""
    for n in range(1, 17):
        t = fisher_similar_table(n, alpha)
        assert np.array_equal(t, t.T) and t.diagonal().all()
        want = np.array([[fisher_exact([[a, n - a], [b, n - b]]).pvalue >= alpha
                          for b in range(n + 1)] for a in range(n + 1)])
        np.testing.assert_array_equal(t, want)


def test_fisher_rule_differs_from_the_public_table():
    """At 16 trials and the 90% level Fisher's test accepts wider gaps than the public
    |a - b| <= 2, and wider in the middle (binomial variance) than at the extremes."""
    f, pub = fisher_similar_table(16, 0.10), public_similar_table(16)
    assert f[0, 4] and not pub[0, 4] and not f[0, 5]
    assert f[8, 13] and not f[8, 14] and not pub[8, 13]
    assert f.sum() > pub.sum()


def test_window_counts_and_hamming():
    for nbits in (64, 1024):
        h = ring([0xFFFF, 0x0F0F], nbits)
        c = window_counts(h, 0, 20, 16, nbits)
        assert c.shape == (2, 5) and c[0, 0] == 16 and c[0, 4] == 12 and c[1, 0] == 8
        assert window_counts(h, 0, 4, 16, nbits).tolist() == [[4], [4]]
    assert hamming(np.uint64(0b1011), np.uint64(0b0001)) == 2
    a, b = ring([0b1011, 1 << 900], 1024), ring([0b0001, 0], 1024)
    assert history_distance(a, b).tolist() == [2, 1]


def _monitored(policy="static", machine="optane-2tier", workload="gups:hotset", **kw):
    sim = tierlab.api.simulation(machine, workload, policy, scale=1 / 64)
    mon = MONITORS.create("idt-regions", **kw)
    sim.policy.attach(sim)
    sim._apply_change(next(iter(sim.workload.changes())))
    mon.attach(sim)
    return sim, mon


def _aggregate(sim, mon, n):
    """Run the monitor's sampling ticks (as the engine's timer would) through n
    aggregations."""
    if mon._t_last is None:
        mon._tick(sim.now)
    for _ in range(n * mon.samples_per_aggr):
        t = sim.now + mon.sample_interval
        sim._advance(t, sim.throughput())
        mon._tick(t)


def test_regions_find_the_hot_range_and_never_merge_across_nodes():
    sim, mon = _monitored()
    _aggregate(sim, mon, 30)
    r = mon.regions
    assert mon.min_nr_regions <= len(r) <= mon.max_nr_regions
    assert np.all(r.start[1:] >= r.end[:-1]) and np.all(r.end > r.start)
    node = sim.mem.node
    # a region's first and last page sit on the same node (merges are same-node only;
    # first-touch placement is contiguous, so only splits could cross a boundary)
    cross = node[r.start] != node[r.end - 1]
    assert cross.sum() <= 2
    wl = sim.workload
    hot = (r.start >= wl.npages - wl.hot_pages)
    assert r.nr_accesses[hot].mean() > 5 * max(r.nr_accesses[~hot].mean(), 0.1)
    assert mon.stats()["merges"] > 0 and mon.stats()["mean_merged_hamming"] is not None
    assert r.history.shape == (len(r), 16) and r.history.dtype == np.uint64
    # one history bit per sampling interval: a hot region's recent samples are mostly
    # accessed, and the number of accessed bits in its history follows its nr_accesses
    ones = np.bitwise_count(mon.recent_history(64, r.history)).astype(float)
    assert ones[hot].mean() > 5 * max(ones[~hot].mean(), 0.1)
    assert np.corrcoef(ones / 64, r.nr_accesses / mon.max_nr_accesses)[0, 1] > 0.8


def test_age_rule_and_reset_after_move():
    sim, mon = _monitored()
    _aggregate(sim, mon, 5)
    r = mon.regions
    assert r.age.max() >= 1
    mon._in_aggr = True
    mon.reset_after_move(np.arange(3))
    assert mon.regions.age[:3].tolist() == [0, 0, 0]
    assert mon.regions.nr_accesses[:3].tolist() == [0, 0, 0]
    mon._in_aggr = False


def test_deterministic_and_charged():
    a = _monitored()
    b = _monitored()
    _aggregate(*a, 8)
    _aggregate(*b, 8)
    ra, rb = a[1].regions, b[1].regions
    assert np.array_equal(ra.start, rb.start) and np.array_equal(ra.history, rb.history)
    assert a[1].cpu_seconds > 0 and a[0].stats.monitor_cpu_seconds >= a[1].cpu_seconds


def test_bad_parameters():
    with pytest.raises(TierlabError, match="merge_rule"):
        MONITORS.create("idt-regions,merge_rule=nope")
    with pytest.raises(TierlabError, match="window"):
        MONITORS.create("idt-regions,history_bits=64,window=80")
    for bad in ("history_bits=nan", "history_bits=-1", "window=1.5", "age_rule=upstream"):
        with pytest.raises(TierlabError, match=bad.split("=")[0]):
            MONITORS.create(f"idt-regions,{bad}")


def test_merge_decisions_on_crafted_histories():
    """Merge only if every 16-bit window passes Fisher's test."""
    mon = IdtRegions(min_nr_regions=3, max_nr_regions=100, history_bits=64)
    same = 0xAAAAAAAAAAAAAAAA
    busy, idle = 0xFFFFFFFFFFFFFFFF, 0
    recent = 0xFFFF  # accessed in the newest 16 samples only
    h = ring([same, same, busy, idle, idle, recent])
    mon._hpos = 1  # the newest bit at position 0
    sim_ok = mon._similar(h, 64)
    # equal histories merge; all-accessed vs never does not; idle vs idle-then-busy
    # differs in one window only, which is enough to keep them apart
    assert sim_ok.tolist() == [True, False, False, True, False]


def test_the_merge_test_sees_1024_samples():
    """IDT's public code keeps IDT_HISTOGRAM_SIZE = 1,024 samples a region, so two
    regions alike over the newest 64 samples but apart 500 samples ago stay apart;
    with history_bits=64 (the earlier length) they merge."""
    old = 0xFFFF << 500  # accessed in 16 samples, 500 to 515 samples ago
    for bits, want in ((1024, [False]), (64, [True])):
        mon = IdtRegions(min_nr_regions=3, max_nr_regions=100, history_bits=bits)
        mon._hpos = 1024 + 1  # full, the newest bit at position 0
        h = ring([0, old], bits)
        assert mon._similar(h, mon._valid_bits()).tolist() == want


@pytest.mark.parametrize("rule,ages", [("idt", [0, 4, 0, 3]), ("damon", [6, 4, 0, 3])])
def test_age_resets_on_any_change_under_idt_rule(rule, ages):
    """IDT's kernel (mm/damon/core.c, damon_merge_regions_of) zeroes a region's age
    whenever nr_accesses changed at all since the last aggregation; DAMON's rule
    (age_rule=damon) only past max_nr_accesses / 10 (10 of 100 samples here)."""
    mon = IdtRegions(min_nr_regions=4, max_nr_regions=4, age_rule=rule)
    mon.set_regions([0, 100, 200, 300], [100, 200, 300, 400], nr_accesses=[0] * 4,
                    age=[5, 3, 7, 2], last_nr_accesses=[50, 20, 0, 99])
    mon._mh = np.zeros(4, dtype=np.uint64)
    mon._hist = ring([1, 2, 4, 8], 1024)  # apart: no merge
    mon._hpos = 1
    mon.sim = type("S", (), {"mem": type("M", (), {"node": np.arange(400) // 100})()})()
    # changes of 1, 0, 11 and 0 samples
    mon.aggregate(np.array([51, 20, 11, 99]))
    assert mon.regions.age.tolist() == ages


def test_history_is_one_bit_per_sampling_interval():
    """history=sample: one bit per interval, "either page accessed", written at a
    circular index (the newest overwrites the oldest once 1,024 are kept);
    history=aggregation keeps the earlier one bit per aggregation."""
    mon = IdtRegions(min_nr_regions=3, max_nr_regions=3)  # no room: no splits
    mon.set_regions([0, 100, 200], [100, 200, 300])
    pat = [(1, 0, 0), (0, 0, 1), (1, 1, 0)]  # region accessed per interval
    for k, acc in enumerate(pat):
        a = np.array(acc, dtype=bool)
        mon.on_sample(a, a, np.array([10, 110, 210]), np.array([20, 120, 220]), k)
    assert mon.recent_history(64).tolist() == [0b101, 0b001, 0b010]
    assert mon.regions.history[:, 0].tolist() == [0b101, 0b100, 0b010]  # oldest at 0
    assert mon._acc.tolist() == [2, 1, 1] and mon._valid_bits() == 3
    for k in range(3, 1024 + 2):  # wrap: positions 0 and 1 rewritten with zeros
        z = np.zeros(3, dtype=bool)
        mon.on_sample(z, z, np.array([10, 110, 210]), np.array([20, 120, 220]), k)
    assert mon._valid_bits() == 1024
    assert mon.regions.history[:, 0].tolist() == [0b100, 0b100, 0]
    agg = IdtRegions(min_nr_regions=3, max_nr_regions=3, history="aggregation")
    agg.set_regions([0, 100, 200], [100, 200, 300])
    agg.on_sample(np.ones(3, bool), np.ones(3, bool), np.zeros(3, int), np.zeros(3, int), 0)
    assert agg.recent_history().tolist() == [0, 0, 0]
    with pytest.raises(TierlabError, match="history"):
        MONITORS.create("idt-regions,history=sometimes")


def test_split_at_the_sampling_interval_between_the_two_pages():
    """A region whose two sampled pages disagree in an interval is cut between them in
    that interval (both halves keep nr_accesses, age and history); agreeing regions
    are left alone; no split beyond max_nr_regions; the sampling-interval subscribers
    see the interval's flags before the split."""
    mon = IdtRegions(min_nr_regions=3, max_nr_regions=4, split_at="between")
    mon.set_regions([0, 100, 200], [100, 200, 300], age=[3, 4, 5])
    seen = []
    mon.subscribe_sample(lambda m, now, acc: seen.append((len(m.regions), acc.tolist())))
    a = np.array([True, True, False])
    b = np.array([False, True, True])
    mon.on_sample(a, b, np.array([10, 150, 240]), np.array([50, 160, 280]), 0.01)
    assert seen == [(3, [True, True, True])]
    # room for one split (4 regions at most): one of the disagreeing regions 0 and 2
    r = mon.regions
    assert len(r) == 4 and mon.splits == 1
    cut = sorted(set(r.start.tolist()) - {0, 100, 200})
    assert cut in ([30], [260])
    assert r.age.tolist() == ([3, 3, 4, 5] if cut == [30] else [3, 4, 5, 5])
    wide = IdtRegions(min_nr_regions=3, max_nr_regions=100, split_at="between")
    wide.set_regions([0, 100, 200], [100, 200, 300])
    wide.on_sample(a, b, np.array([10, 150, 240]), np.array([50, 160, 280]), 0.01)
    assert wide.regions.start.tolist() == [0, 30, 100, 200, 260]


def test_the_public_code_splits_at_the_regions_middle():
    """split_at=middle (the default): vaddr.c cuts a region whose two sampled pages
    disagree at half its size, wherever the pages are (a region of 101 pages at 50);
    both pages may land in one half."""
    mon = IdtRegions(min_nr_regions=3, max_nr_regions=100)
    mon.set_regions([0, 100, 201], [100, 201, 300])
    a = np.array([True, True, False])
    b = np.array([False, True, True])
    mon.on_sample(a, b, np.array([10, 150, 240]), np.array([20, 160, 280]), 0.01)
    assert mon.regions.start.tolist() == [0, 50, 100, 201, 250]
    with pytest.raises(TierlabError, match="split_at"):
        IdtRegions(split_at="left")


def _attached(name, workload, scale):
    sim = tierlab.api.simulation("optane-2tier", workload, "static", scale=scale)
    mon = MONITORS.create(name, min_nr_regions=1000, max_nr_regions=10000)
    sim.policy.attach(sim)
    sim._apply_change(next(iter(sim.workload.changes())))
    mon.attach(sim)
    return sim, mon


@pytest.mark.parametrize("name", ["idt-regions", "damon"])
def test_a_synthetic_miniature_keeps_the_region_bounds(name):
    """docs/model.md, Scale: a 1/F synthetic miniature shrinks the hot set by F, so it
    keeps the full-scale region count (each region the same share of the footprint) and
    charges F x 150 ns per check, F x the full-scale monitor CPU."""
    share = {}
    for scale in (1 / 8, 1 / 64):
        sim, mon = _attached(name, "gups:hotset", scale)
        assert (mon.min_nr_regions, mon.max_nr_regions) == (1000, 10000)
        update = getattr(mon, "ops_update", None) or mon._ops_update
        for _ in range(3):
            sim._advance(sim.now + mon.update_interval, sim.throughput())
            update(sim.now, force=True)
        r = mon.regions
        assert 1000 <= len(r.start) <= 10000
        share[scale] = float(np.mean(r.end - r.start)) / sim.workload.npages
        before = mon.cpu_seconds
        mon.charge_checks(1000)
        assert mon.cpu_seconds - before == pytest.approx(1000 * 150e-9 * scale)
    # each region covers the same share of the footprint at both scales
    assert share[1 / 64] == pytest.approx(share[1 / 8], rel=0.05)


@pytest.mark.parametrize("copies,scale,laid_out", [(64, 1 / 8, 8), (16, 1 / 64, 1)])
def test_trace_copies_get_their_share_of_the_region_bounds(copies, scale, laid_out):
    """n of a trace's k copies keep their recorded size: n/k x the bounds, so the regions
    over one copy are the full-scale run's, and F / (n/k) x 150 ns per check."""
    sim, mon = _attached("idt-regions",
                         f"trace:tests/data/traces/rocksdb-dbbench.npz,copies={copies}",
                         scale)
    assert sim.workload.copies == laid_out
    share = laid_out / copies
    assert (mon.min_nr_regions, mon.max_nr_regions) == (max(3, round(1000 * share)),
                                                        round(10000 * share))
    mon.charge_checks(1000)
    assert mon.cpu_seconds == pytest.approx(1000 * 150e-9 * scale / share)
