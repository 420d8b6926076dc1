"""IDT's region monitor: the Fisher merge table, window counts, node-aware merging,
disagreement splits, history, and a run under `static`."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import fisher_exact

import tierlab
from tierlab.errors import TierlabError
from tierlab.monitors import MONITORS
from tierlab.monitors.idt_regions import (fisher_similar_table, hamming,
                                          public_similar_table, window_counts)


def test_fisher_table_matches_scipy_and_is_symmetric():
    t = fisher_similar_table(16, 0.10)
    assert np.array_equal(t, t.T) and t.diagonal().all()
    for a, b in [(0, 5), (2, 9), (8, 8), (0, 16), (3, 4), (10, 15)]:
        p = fisher_exact([[a, 16 - a], [b, 16 - b]]).pvalue
        assert t[a, b] == (p >= 0.10)


def test_fisher_rule_differs_from_the_public_table():
    """At 16 trials and the 90% level Fisher's test accepts wider gaps than the public
    |a - b| <= 2, and wider in the middle (binomial variance) than at the extremes."""
    f, pub = fisher_similar_table(16, 0.10), public_similar_table(16)
    assert f[0, 4] and not pub[0, 4] and not f[0, 5]
    assert f[8, 13] and not f[8, 14] and not pub[8, 13]
    assert f.sum() > pub.sum()


def test_window_counts_and_hamming():
    h = np.array([0xFFFF, 0x0F0F], dtype=np.uint64)
    c = window_counts(h, 20, 16)
    assert c.shape == (2, 5) and c[0, 0] == 16 and c[0, 4] == 12 and c[1, 0] == 8
    assert window_counts(h, 4, 16).tolist() == [[4], [4]]
    assert hamming(np.uint64(0b1011), np.uint64(0b0001)) == 2


def _monitored(policy="static", machine="optane-2tier", workload="gups:hotset", **kw):
    sim = tierlab.api.simulation(machine, workload, policy, scale=1 / 64)
    mon = MONITORS.create("idt-regions", **kw)
    sim.policy.attach(sim)
    sim._apply_change(next(iter(sim.workload.changes())))
    mon.attach(sim)
    return sim, mon


def _aggregate(sim, mon, n):
    for _ in range(n):
        t = sim.now + mon.aggr_interval
        sim._advance(t, sim.throughput())
        mon._kdamond(t)


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
    assert len(r.history) == len(r) and r.history.dtype == np.uint64
    # the newest bit is "accessed in the last aggregation" (exact before merging; a
    # merged run keeps its first region's history and the size-weighted nr_accesses)
    assert np.mean((r.history & np.uint64(1)) == (r.nr_accesses > 0)) > 0.9


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
        MONITORS.create("idt-regions,window=80")


def test_merge_and_split_decisions_on_crafted_histories():
    """Merge only if every 16-bit window passes Fisher's test; split a region whose two
    samples disagreed."""
    from tierlab.monitors.idt_regions import IdtRegions
    mon = IdtRegions(min_nr_regions=3, max_nr_regions=100)
    same = np.uint64(0xAAAAAAAAAAAAAAAA)
    busy, idle = np.uint64(0xFFFFFFFFFFFFFFFF), np.uint64(0)
    recent = np.uint64(0xFFFF)  # accessed in the newest 16 aggregations only
    h = np.array([same, same, busy, idle, idle, recent], dtype=np.uint64)
    sim_ok = mon._similar(h, 64)
    # equal histories merge; all-accessed vs never does not; idle vs idle-then-busy
    # differs in one window only, which is enough to keep them apart
    assert sim_ok.tolist() == [True, False, False, True, False]
    mon.set_regions([0, 100, 200], [100, 200, 300])
    mon._sync()
    mon._dis = np.array([0, 3, 0])
    mon._split_disagreeing()
    assert len(mon.regions) == 4
    assert mon.regions.start.tolist()[:2] == [0, 100] and mon.regions.end.tolist()[-1] == 300
    assert 100 < mon.regions.start[2] < 200  # the disagreeing region was cut inside
