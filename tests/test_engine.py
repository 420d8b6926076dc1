"""Engine invariants, determinism and sanity of the closed-loop model."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tierlab import api, jit
from tierlab.engine import Simulation, lru
from tierlab.monitors import draws
from tierlab.engine.memory import BLOCK, Memory, UNALLOC
from tierlab.engine.throughput import solve_throughput
from tierlab.machines import Machine, Tier, load_machine
from tierlab.policies import ALLOCS, POLICIES

from conftest import HotCold

GB = 1e9


def small_machine(dram_pages=1024, slow_pages=8192, tiers=2):
    ts = [Tier("dram", "dram", dram_pages * 4096, 81, 86, 105 * GB, 80 * GB, 0, True),
          Tier("optane", "optane", slow_pages * 4096, 305, 100, 39 * GB, 13 * GB, 0, False)]
    if tiers == 4:
        ts = [ts[0], Tier("dram1", "dram", dram_pages * 4096, 81, 86, 105 * GB, 80 * GB, 1),
              ts[1], Tier("optane1", "optane", slow_pages * 4096, 305, 100, 39 * GB, 13 * GB, 1,
                          False)]
    return Machine("small", ts)


def simulate(machine, workload, policy="static", alloc="dram-preferred", seed=0):
    sim = Simulation(machine, workload, POLICIES.create(policy), ALLOCS.create(alloc), seed=seed)
    rec = sim.run()
    return sim, rec


def check_invariants(sim):
    mem = sim.mem
    k = sim.machine.nnodes
    counts = np.bincount(mem.node, minlength=256)
    assert np.array_equal(counts[:k], mem.used), "used[] disagrees with the page map"
    frames = sim.shadows.per_node() if sim.shadows is not None else np.zeros(k, np.int64)
    assert np.array_equal(frames, mem.held), "held[] is not the shadow frames"
    assert np.all(mem.used + mem.held <= mem.capacity), "a node is over capacity"
    if sim.shadows is not None:
        live, sn = sim.shadows.shadowed()
        assert len(np.unique(live)) == len(live), "a page with two live shadows"
        assert np.all(mem.node[live] != UNALLOC), "a freed page kept its shadow"
        assert np.all(mem.node[live] != sn), "a shadow on its page's node"
        assert np.array_equal(sim.shadows.node_of(live), sn), "the page map lost a shadow"
        alone = np.setdiff1d(np.arange(mem.npages), live)
        assert np.all(sim.shadows.node_of(alone) == UNALLOC), "a page without one has one"
    assert np.all(mem.used <= mem.capacity), "a node is over capacity"
    assert counts[k:UNALLOC].sum() == 0, "a page sits on a node that does not exist"
    active = (sim.lru.flags & 1) != 0
    assert np.array_equal(np.bincount(mem.node[active], minlength=256)[:k],
                          sim.lru.nr_active), "LRU active counts drifted"
    # the per-block node counts equal a recount from the page map
    B = BLOCK
    pad = np.full(len(mem.blocks) * B, UNALLOC, dtype=np.uint8)
    pad[:mem.npages] = mem.node
    per = np.stack([(pad.reshape(-1, B) == i).sum(axis=1) for i in range(k)], axis=1)
    assert np.array_equal(per, mem.blocks), "block counts drifted from the page map"
    # the incrementally kept per-node rates equal a recount from scratch
    r, w = sim.timeline.field.per_node_totals(mem.node, k)
    assert np.allclose(r, sim._reads, rtol=1e-9, atol=1e-12)
    assert np.allclose(w, sim._writes, rtol=1e-9, atol=1e-12)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(policy=st.sampled_from(["static", "oracle", "test-random"]),
       alloc=st.sampled_from(ALLOCS.names()),
       tiers=st.sampled_from([2, 4]),
       phases=st.integers(1, 4), grow=st.integers(0, 600), free_first=st.integers(0, 300),
       seed=st.integers(0, 3))
def test_pages_conserved_and_capacity_respected(policy, alloc, tiers, phases, grow,
                                                free_first, seed):
    m = small_machine(dram_pages=900, slow_pages=3000, tiers=tiers)
    wl = HotCold(n=3000, hot=300, phases=max(phases, 2 if grow else 1), grow=grow,
                 free_first=free_first, work=5e6)
    sim, rec = simulate(m, wl, policy, alloc, seed)
    check_invariants(sim)
    allocated = wl.n + grow - free_first
    assert sim.mem.allocated == allocated, "pages lost or duplicated"
    assert rec["work"] == pytest.approx(wl.total_work)
    assert sum(rec["tier_access_share"].values()) == pytest.approx(1.0)


@pytest.mark.parametrize("policy", ["static", "oracle", "test-random"])
def test_same_seed_same_result(policy):
    m = small_machine()
    a = simulate(m, HotCold(phases=3), policy, seed=7)[1]
    b = simulate(m, HotCold(phases=3), policy, seed=7)[1]
    for r in (a, b):
        r.pop("wall_seconds")
    assert a == b


def test_different_seeds_differ_for_random_policy():
    m = small_machine()
    a = simulate(m, HotCold(), "test-random", seed=1)[1]
    b = simulate(m, HotCold(), "test-random", seed=2)[1]
    assert a["sim_seconds"] != b["sim_seconds"]


def test_all_fast_is_fastest_and_all_slow_slowest():
    """A footprint that fits DRAM: DRAM-Always (all fast) beats PM-Always (all slow);
    mixed placements lie in between."""
    m = small_machine(dram_pages=5000, slow_pages=8192)
    thr = {a: simulate(m, HotCold(n=3000, hot=300), "static", a)[1]["throughput"]
           for a in ALLOCS.names()}
    assert thr["dram-always"] == max(thr.values())
    assert thr["pm-always"] == min(thr.values())
    assert thr["dram-always"] > 1.5 * thr["pm-always"]


def test_bandwidth_cap_bites():
    """More threads stop helping once the slow tier's write bandwidth is saturated:
    throughput approaches bandwidth / bytes per unit of work and never exceeds it."""
    m = small_machine(dram_pages=64, slow_pages=8192)
    thr = []
    for threads in (1, 2, 64, 512):
        wl = HotCold(n=3000, hot=300, threads=threads, mlp=10, compute_ns=1, write_frac=0.5)
        thr.append(simulate(m, wl, "static", "pm-always")[1]["throughput"])
    # 1 read + 1 write per update on optane: read traffic 2*64 B at 39 GB/s, writes 64 B
    # at 13 GB/s -> max 1 / (128/39e9 + 64/13e9) updates/s
    cap = 1 / (128 / 39e9 + 64 / 13e9)
    assert thr[-1] <= cap * 1.0001
    assert thr[-1] > 0.9 * cap
    assert thr[1] > 1.6 * thr[0]  # far from the cap, threads scale
    assert thr[-1] < 1.2 * thr[-2]  # at the cap they do not


def test_loaded_latency_grows_with_utilisation():
    x1, u1, f1 = solve_throughput([2.0], [0.0], [100.0], [100.0], [1e12], [1e12], [0.0],
                                  10.0, 4.0, 1)
    x2, u2, f2 = solve_throughput([2.0], [0.0], [100.0], [100.0], [1e9], [1e9], [0.0],
                                  10.0, 4.0, 64)
    assert u1[0] < 0.01 and f1[0] == pytest.approx(1.0, abs=0.01)
    assert u2[0] > 0.9 and f2[0] > 3


@pytest.mark.parametrize("alloc", ["dram-preferred", "pm-preferred", "pm-always",
                                   "dram-always"])
@pytest.mark.parametrize("phases", [1, 4])
def test_oracle_never_beaten(alloc, phases):
    m = small_machine(dram_pages=600, slow_pages=8192)
    recs = {p: simulate(m, HotCold(n=3000, hot=400, phases=phases), p, alloc, seed=3)[1]
            for p in ("static", "test-random", "oracle")}
    best = recs["oracle"]["throughput"]
    # a policy may briefly fill DRAM between the min and low watermarks (0.5% of the
    # node) where the oracle stops; nothing else may beat it
    assert all(r["throughput"] <= best * (1 + 1e-3) for r in recs.values())
    # the hot set is touched last: only dram-always already places it in DRAM
    assert best >= recs["static"]["throughput"] * (1.2 if alloc != "dram-always" else 1.0)
    # and when the hot set fits in DRAM the oracle serves it from DRAM
    assert recs["oracle"]["tier_access_share"]["dram"] > 0.85


def test_allocation_policies_place_first_touch_where_defined():
    m = small_machine(dram_pages=1000, slow_pages=8192)
    wl = lambda: HotCold(n=3000, hot=300)  # noqa: E731
    placed = {}
    for a in ALLOCS.names():
        sim = Simulation(m, wl(), POLICIES.create("static"), ALLOCS.create(a))
        sim.policy.attach(sim)
        sim._apply_change(next(iter(sim.workload.changes())))
        placed[a] = sim.mem.node.copy()
    lowfree = int(1000 * 0.01)
    # dram-preferred: first touched pages fill DRAM down to its low watermark
    assert np.all(placed["dram-preferred"][: 1000 - lowfree - 20] == 0)
    assert np.all(placed["dram-preferred"][1000:] == 1)
    # dram-always: the most recently touched pages are in DRAM, older ones demoted
    assert np.all(placed["dram-always"][-900:] == 0)
    assert np.all(placed["dram-always"][:1000] == 1)
    # pm-*: everything on the slow node while it has room
    assert np.all(placed["pm-preferred"] == 1)
    assert np.all(placed["pm-always"] == 1)


def test_four_tier_demotion_path_and_kswapd():
    """Allocation spills down the path; kswapd keeps every node at or above low."""
    m = small_machine(dram_pages=500, slow_pages=4000, tiers=4)
    assert m.demotion == [0, 1, 2, 3]
    assert m.fast_nodes() == [0, 1] and m.slow_nodes() == [2, 3]
    sim, rec = simulate(m, HotCold(n=3000, hot=300), "static", "dram-always")
    check_invariants(sim)
    assert np.all(sim.mem.free >= sim.mem.wmark_min)
    assert rec["demotions"] > 0


def test_migration_costs_are_charged():
    m = small_machine()
    sim, rec = simulate(m, HotCold(), "test-random", seed=0)
    assert rec["migrated_bytes"] == (rec["promotions"] + rec["demotions"]) * 4096
    assert rec["migration_cpu_seconds"] > 0 and rec["app_stall_seconds"] > 0
    static = simulate(m, HotCold(), "static", seed=0)[1]
    assert static["migrated_bytes"] == 0 and static["app_stall_seconds"] == 0


def test_first_touch_costs_pages_allocated_after_the_set_up():
    """Machine.first_touch_s: every page the workload allocates after its first change
    stalls a touching thread once (the run takes grow x cost / threads longer); the
    set-up's pages are free, and a cost of 0 changes nothing."""
    from dataclasses import replace
    m = small_machine()
    cost, grow, threads = 40e-6, 512, 8
    runs = {}
    for ft in (0.0, cost):
        mm = replace(m, first_touch_s=ft)
        for g in (0, grow):
            wl = HotCold(phases=2, grow=g, threads=threads)
            rec = simulate(mm, wl, "static")[1]
            rec.pop("wall_seconds")
            runs[ft, g] = rec
    assert runs[cost, 0] == runs[0.0, 0]
    extra = runs[cost, grow]["app_stall_seconds"] - runs[0.0, grow]["app_stall_seconds"]
    assert extra == pytest.approx(grow * cost / threads, rel=1e-9)
    assert runs[cost, grow]["sim_seconds"] == pytest.approx(
        runs[0.0, grow]["sim_seconds"] + grow * cost / threads, rel=1e-6)


@pytest.mark.parametrize("policy", ["static", "autonuma-tiering", "damon-tiering"])
def test_demotion_disabled_stops_reclaim_not_policy_migrations(policy):
    """Machine.demotion_enabled off (can_demote): kswapd and direct reclaim demote
    nothing, so a full fast node stays full; a policy's own migrations (DAMOS) still
    run."""
    from dataclasses import replace
    m = load_machine("optane-2tier", 1 / 256)
    recs = {}
    for on in (True, False):
        recs[on] = api.run(machine=replace(m, demotion_enabled=on),
                           workload="gups:hotset,updates=3e8", policy=policy,
                           alloc="dram-preferred", scale=1 / 256, seed=0)
    off = recs[False]
    assert off["reclaim_pages"] == 0
    assert off["migrations_by_reason"].get("reclaim", 0) == 0
    if policy != "static":
        assert recs[True]["reclaim_pages"] > 0
    if policy == "damon-tiering":
        assert off["migrations_by_reason"].get("damos_migrate_hot", 0) > 0


def test_reclaim_demotes_idle_frames_first():
    """Other processes' idle frames (`Memory.idle`, part of `held`) are the oldest on
    every LRU: reclaim demotes them before any page of the workload, as a copy, and
    counts them; with the idle frames gone, the policy's victims follow; nothing moves
    with demotion_enabled off."""
    from dataclasses import replace
    for on in (True, False):
        m = replace(small_machine(), demotion_enabled=on)
        sim = Simulation(m, HotCold(), POLICIES.create("static"),
                         ALLOCS.create("dram-preferred"))
        sim.policy.attach(sim)
        sim._apply_change(next(iter(sim.workload.changes())))
        mem = sim.mem
        mem.held[0] += 40
        mem.idle[0] = 30
        nodes = mem.node.copy()
        got = sim.reclaim(0, 20)
        if not on:
            assert got == 0 and mem.idle[0] == 30 and sim.stats.demotions == 0
            continue
        assert got == 20 and np.array_equal(mem.node, nodes)
        assert mem.idle.tolist()[:2] == [10, 20] and mem.held.tolist()[:2] == [20, 20]
        assert sim.stats.demotions == 20 and sim.stats.migrated_bytes == 20 * 4096
        assert sim.reclaim(0, 25) == 25 and mem.idle[0] == 0
        assert np.count_nonzero((nodes == 0) & (mem.node == 1)) == 15
        k = m.nnodes
        assert np.array_equal(np.bincount(mem.node, minlength=256)[:k], mem.used)


def test_pingpong_counts_quick_round_trips():
    m = small_machine()
    sim = Simulation(m, HotCold(), POLICIES.create("static"), ALLOCS.create("dram-preferred"))
    sim.policy.attach(sim)
    sim._apply_change(next(iter(sim.workload.changes())))
    pages = np.arange(10)
    assert sim.migrate(pages, 1) == 10  # demote
    sim.now = 1.0
    assert sim.migrate(pages[:4], 0) == 4  # promote back within the window
    assert sim.stats.pingpong == 4
    sim.now = 100.0
    assert sim.migrate(pages[4:], 0) == 6  # long after: not ping-pong
    assert sim.stats.pingpong == 4


def test_scaled_presets_keep_ratios():
    full = load_machine("optane-4tier")
    small = load_machine("optane-4tier", scale=1 / 8)
    assert [t.capacity // 8 for t in full.tiers] == [t.capacity for t in small.tiers]
    assert [t.read_lat_ns for t in full.tiers] == [t.read_lat_ns for t in small.tiers]
    assert full.demotion == [0, 1, 2, 3]
    # remote DRAM is slower than local DRAM but faster than local Optane
    lat = [full.read_latency_ns(i) for i in range(4)]
    assert lat[0] < lat[1] < lat[2] < lat[3]


@pytest.mark.parametrize("spare", [True, False])
@pytest.mark.parametrize("sync", [True, False])
def test_copy_costs_are_scale_free(sync, spare):
    """docs/model.md: a --scale F miniature is delayed as much as the full-scale run.
    Copying the same share of memory at 1, 1/8 and 1/64 must stall the application and
    busy the mover alike (synchronous copies run in the F-times-fewer app threads), also
    where the application's threads leave no core spare and the background mover steals
    from them (64 threads on 24 cores)."""
    import tierlab.api
    wl = "gups:hotset" if spare else "gups:hotset,threads=64"
    got = []
    for sc in (1, 1 / 8, 1 / 64):
        sim = tierlab.api.simulation("optane-2tier", wl, "static", scale=sc)
        assert (sim._spare_cores > 0) == spare
        sim._apply_change(next(iter(sim.workload.changes())))
        sim.migrate(np.arange(int(2 ** 20 * sc)), 1, sync=sync)
        got.append((sim.stats.app_stall_seconds, sim.stats.migration_cpu_seconds))
    for other in got[1:]:
        for a, b in zip(got[0], other):
            assert b == pytest.approx(a, rel=1e-6)
    assert got[0][0] > 0 and (sync or got[0][1] > 0)
    if not sync:  # with no core spare the stall holds the mover's busy time / threads
        assert (got[0][0] >= got[0][1] / 64) != spare


def test_default_reclaim_is_lru_and_spares_hot_pages():
    """kswapd's default victims come from the inactive list's CLOCK over accessed bits:
    demotion takes cold pages and activates the hot ones instead."""
    m = small_machine(dram_pages=1000, slow_pages=8192)
    wl = HotCold(n=3000, hot=300, hot_frac=0.99)
    sim = Simulation(m, wl, POLICIES.create("static"), ALLOCS.create("pm-preferred"))
    sim.policy.attach(sim)
    sim._apply_change(next(iter(wl.changes())))
    # put the hot range and 600 cold pages in DRAM, then let time pass
    hot = np.arange(2700, 3000)
    cold = np.arange(0, 600)
    assert sim.migrate(np.concatenate([hot, cold]), 0) == 900
    # 2.5e4 updates in 5 s: each hot page ~165 accesses, each cold page ~0.17
    sim._advance(5.0, 5e3)
    sim.lru._hand[(0, 0)] = 2700  # the hand starts on the hot pages: FIFO takes them
    victims = sim.lru.reclaim_victims(0, 300)
    assert len(victims) == 300
    assert np.isin(victims, hot).mean() < 0.05
    assert sim.lru.is_active(hot).mean() > 0.95  # referenced: activated, not reclaimed
    assert sim.stats.migration_cpu_seconds > 0


@pytest.mark.parametrize("policy", ["autonuma-tiering", "tpp", "multi-clock"])
@pytest.mark.parametrize("block", [1024, 7])
def test_fused_reclaim_sweep_is_scan_then_set_active(policy, block, monkeypatch):
    """kswapd's reclaim through `LRU.sweep`'s one compiled pass (`lru.lru_sweep`:
    the hand, the accessed-bit draws and the list changes by blocks, resumed mid-word
    when a block fills) leaves the same run as `scan` then `_set_active`: the same
    record, page map, LRU flags, counts, hands and pass times, and the same stream
    after, across field changes (several epochs per draw), growth and frees."""

    def state(sim, rec):
        lists = sim.lru
        return (rec, sim.mem.node.copy(), lists.flags.copy(), lists.nr_active.copy(),
                lists.active_bits().copy(), dict(lists._hand), lists.scanned,
                {k: np.concatenate((p.bounds, p.times)) for k, p in lists._passes.items()},
                sim.bits.rng.random(4))

    runs, fused = fused_and_apart(monkeypatch, lru, "lru_sweep", lambda *a, **k: None,
                                  policy, block, 2e8, state)
    assert fused > 10 and runs[0][6] > 0
    assert_same_runs(*runs)


def fused_and_apart(monkeypatch, owner, name, off, policy, block, work, state):
    """Two runs of `policy` on four small tiers (a hot set that moves, growth and
    frees), the first through `owner.name` (a compiled pass) and the second with it
    replaced by `off` (which makes its caller take the way apart), draws in blocks of
    `block` pages: (state(sim, record) of each, the compiled pass's calls that ran)."""
    if not jit.numba_jit():
        pytest.skip("the compiled pass needs numba")
    monkeypatch.setattr(draws, "DRAW_BLOCK", block)
    wl = HotCold(n=3000, hot=300, phases=4, grow=400, free_first=200, work=work)
    runs, fused = [], [0]
    real = getattr(owner, name)

    def counted(*a, **k):
        got = real(*a, **k)
        fused[0] += got is not None and got is not False
        return got

    for patch in (counted, off):
        monkeypatch.setattr(owner, name, patch)
        sim = Simulation(small_machine(dram_pages=900, slow_pages=3000, tiers=4), wl,
                         POLICIES.create(policy), ALLOCS.create("dram-preferred"), seed=2)
        rec = sim.run()
        rec.pop("wall_seconds")
        check_invariants(sim)
        runs.append(state(sim, rec))
    return runs, fused[0]


def assert_same_runs(a, b):
    """Two runs' (record, arrays or dicts of arrays...) equal item by item."""
    (rec_a, *a), (rec_b, *b) = a, b
    assert rec_a == rec_b
    for x, y in zip(a, b):
        if isinstance(x, dict):
            assert x.keys() == y.keys()
            for k in x:
                np.testing.assert_array_equal(x[k], y[k])
        else:
            np.testing.assert_array_equal(x, y)


def test_pass_times_interval_map_matches_dense():
    from tierlab.engine.memory import PassTimes
    rng = np.random.default_rng(0)
    n = 500
    pt, dense = PassTimes(n), np.zeros(n)
    for step in range(400):
        a = int(rng.integers(0, n))
        c = a + int(rng.integers(1, 120))
        t = float(step + 1)
        if rng.random() < 0.5:
            pt.set(a, c, t)
            dense[a:min(c, n)] = t
        else:
            pt.set_swept(a, c - a, t)
            dense[a:min(c, n)] = t
            if c > n:
                dense[: c - n] = t
        assert np.array_equal(pt.get(np.arange(n)), dense)
        assert len(pt.times) == len(pt.bounds) - 1 and pt.bounds[-1] == n


def test_mark_accessed_two_touches_activate():
    m = small_machine()
    sim = Simulation(m, HotCold(), POLICIES.create("static"), ALLOCS.create("dram-preferred"))
    sim.policy.attach(sim)
    sim._apply_change(next(iter(sim.workload.changes())))
    p = np.array([5, 6])
    assert not sim.lru.mark_accessed(p).any()  # inactive -> referenced
    assert not sim.lru.is_active(p).any()
    assert not sim.lru.mark_accessed(p).any()  # referenced -> active
    assert sim.lru.is_active(p).all()
    assert sim.lru.mark_accessed(p).all()  # reports they were active
    assert sim.lru.nr_active[sim.mem.node[5]] == 2


def test_lists_rebalance_when_inactive_is_low():
    """With every page active and none referenced, reclaim first deactivates from the
    active list (shrink_active_list), then reclaims from the inactive one."""
    m = small_machine(dram_pages=1000)
    sim = Simulation(m, HotCold(n=3000, hot=300), POLICIES.create("static"),
                     ALLOCS.create("dram-preferred"))
    sim.policy.attach(sim)
    sim._apply_change(next(iter(sim.workload.changes())))
    on0 = np.flatnonzero(sim.mem.node == 0)
    sim.lru.activate(on0)
    assert sim.lru.inactive_is_low(0)
    victims = sim.lru.reclaim_victims(0, 50)
    assert len(victims) == 50
    assert sim.lru.nr_inactive(0) > 0


def test_pages_on_never_returns_a_page_twice():
    from tierlab.engine.memory import Memory
    m = small_machine(dram_pages=1000)
    mem = Memory(m, 5000)
    mem.place_range(0, 700, 0)
    for start in (0, 350, 4999):
        pages, hand, scanned = mem.pages_on(0, start, 10_000)
        assert len(pages) == 700 and len(np.unique(pages)) == 700 and scanned == 5000


def _fresh(mover="linux"):
    from tierlab.engine import Costs
    m = small_machine()
    sim = Simulation(m, HotCold(), POLICIES.create("static"), ALLOCS.create("dram-preferred"),
                     costs=Costs.for_mover(mover))
    sim.policy.attach(sim)
    sim._apply_change(next(iter(sim.workload.changes())))
    return sim


def test_nimble_parallel_copy_shortens_sync_stalls_not_cpu():
    stalls, cpu = {}, {}
    for mover in ("linux", "nimble"):
        sim = _fresh(mover)
        moved = sim.migrate(np.arange(0, 400), 1, sync=True)
        assert moved == 400
        stalls[mover] = sim.stats.app_stall_seconds
        # CPU work in thread-seconds: helper threads' time plus the stalled thread's
        cpu[mover] = (sim.stats.migration_cpu_seconds
                      + sim.stats.app_stall_seconds * sim.workload.threads)
    assert stalls["nimble"] < 0.5 * stalls["linux"]
    assert cpu["nimble"] == pytest.approx(cpu["linux"], rel=0.05)


def test_fault_promotions_land_over_their_stall():
    """`migrate(sync=True, land_over_stall=True)`: the faulting thread copies one page
    after another, so the pages land evenly over the stall pending once their copies
    are charged (the fault handling ahead of them included), in the order given; until then they stay put, their frames on the target are taken, and
    no other move takes them. Once landed, everything is as after an immediate move."""
    sim, ref = _fresh(), _fresh()
    for s in (sim, ref):
        s.migrate(np.flatnonzero(s.mem.node == 0)[:300], 1)
    pages = np.flatnonzero(sim.mem.node == 1)[:200]
    free0, stall0 = sim.mem.free.copy(), sim._stall_pending
    assert sim.migrate(pages, 0, sync=True, land_over_stall=True) == 200
    stall = sim._stall_pending - stall0
    assert stall > 0 and np.all(sim.mem.node[pages] == 1)
    assert sim.mem.free[0] == free0[0] - 200 and sim.stats.promotions == 0
    # in flight: not moved again, not exchanged
    assert sim.migrate(pages, 0, sync=True) == 0 and sim.migrate(pages[:5], 1) == 0
    assert sim.exchange(pages[:5], np.flatnonzero(sim.mem.node == 0)[:5]) == 0
    t0 = sim.now
    sim._advance(t0 + 0.25 * (stall0 + stall), 0.0)  # a quarter of the stall pending
    sim._land(sim.now)
    assert np.all(sim.mem.node[pages[:50]] == 0) and np.all(sim.mem.node[pages[50:]] == 1)
    assert sim.stats.promotions == 50 and sim.mem.free[0] == free0[0] - 200
    sim._land(np.inf)
    assert not sim._landing and np.all(sim.mem.node[pages] == 0)
    check_invariants(sim)
    assert ref.migrate(pages, 0, sync=True) == 200
    assert np.array_equal(sim.mem.node, ref.mem.node)
    assert np.array_equal(sim.mem.free, ref.mem.free)
    assert sim._stall_pending == pytest.approx(ref._stall_pending, rel=1e-12)
    for k in ("promotions", "demotions", "migrated_bytes"):
        assert getattr(sim.stats, k) == getattr(ref.stats, k), k


def test_a_page_freed_in_flight_does_not_land():
    """A page freed while its copy is in flight is dropped at landing and its frame on
    the target given back; the others land."""
    from tierlab.workloads.base import Change
    sim = _fresh()
    sim.migrate(np.flatnonzero(sim.mem.node == 0)[:300], 1)
    pages = np.flatnonzero(sim.mem.node == 1)[:100]
    free0 = sim.mem.free.copy()
    sim.migrate(pages, 0, sync=True, land_over_stall=True)
    gone = pages[10:20]
    sim._apply_change(Change(0, free=np.array([[gone[0], gone[-1] + 1]])))
    sim._land(np.inf)
    assert np.all(sim.mem.node[gone] == UNALLOC)
    kept = np.setdiff1d(pages, gone)
    assert np.all(sim.mem.node[kept] == 0) and sim.stats.promotions == 90
    assert sim.mem.free[0] == free0[0] - 90 and sim.mem.held.sum() == 0
    check_invariants(sim)


@pytest.mark.parametrize("policy", ["autonuma-tiering", "tpp", "colloid-tpp"])
def test_runs_with_fault_promotions_end_with_every_page_landed(policy, monkeypatch):
    """A run whose policy promotes on hint faults (`autonuma.fault_migrate`) queues its
    promotions to land over their stalls, and ends with none in flight and the page
    map, frames and rates consistent."""
    sim = api.simulation(machine="optane-2tier", workload="gups:hotset,updates=2e9",
                         policy=policy, alloc="dram-preferred", scale=1 / 256, seed=0)
    queued = []
    real = sim._queue_landing
    monkeypatch.setattr(sim, "_queue_landing", lambda p, *a: (queued.append(len(p)),
                                                              real(p, *a)))
    rec = sim.run()
    assert queued and 0 < sum(queued) <= rec["promotions"]
    assert not sim._landing and sim.mem.held.sum() == 0
    check_invariants(sim)


def test_exchange_swaps_without_free_space():
    for mover in ("linux", "nimble"):
        sim = _fresh(mover)
        fast = np.flatnonzero(sim.mem.node == 0)[:100]
        slow = np.flatnonzero(sim.mem.node == 1)[:100]
        used = sim.mem.used.copy()
        assert sim.exchange(slow, fast) == 100
        assert np.all(sim.mem.node[slow] == 0) and np.all(sim.mem.node[fast] == 1)
        assert np.array_equal(sim.mem.used, used)
        assert sim.stats.promotions == 100 and sim.stats.demotions == 100
        check_invariants(sim)
    # the Linux mover copies one way then the other; Nimble does both at once
    lin, nim = _fresh("linux"), _fresh("nimble")
    for s in (lin, nim):
        s.exchange(np.flatnonzero(s.mem.node == 1)[:100], np.flatnonzero(s.mem.node == 0)[:100],
                   sync=True)
    assert nim.stats.app_stall_seconds < lin.stats.app_stall_seconds / 4


def test_unknown_mover_is_a_clear_error():
    from tierlab.engine import Costs
    from tierlab.errors import TierlabError
    with pytest.raises(TierlabError, match="valid: linux, nimble"):
        Costs.for_mover("dma")


def test_machine_watermarks_from_toml_reach_memory(tmp_path):
    """Small nodes have large watermarks (min_free_kbytes): a machine carries its own,
    the engine's Memory uses them, and a bad triple is refused with the valid form."""
    from tierlab import api
    from tierlab.errors import TierlabError
    toml = """[machine]
name = "small"
watermarks = [0.05, 0.06, 0.07]
[[tier]]
name = "dram"
capacity = "64MiB"
read_lat_ns = 100
read_bw = "10GB"
[[tier]]
name = "cxl"
kind = "cxl"
capacity = "256MiB"
read_lat_ns = 300
read_bw = "5GB"
has_cpus = false
"""
    p = tmp_path / "small.toml"
    p.write_text(toml)
    sim = api.simulation(machine=str(p), workload="gups:uniform,size=32MiB", policy="static")
    cap = sim.mem.capacity[0]
    assert sim.mem.wmark_min[0] == int(cap * 0.05) and sim.mem.wmark_high[0] == int(cap * 0.07)
    p.write_text(toml.replace("[0.05, 0.06, 0.07]", "[0.07, 0.06, 0.05]"))
    with pytest.raises(TierlabError, match="watermarks"):
        api.make_machine(str(p))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), npages=st.integers(1, 5 * BLOCK + 17))
def test_block_counts_answer_range_queries_as_the_page_map(seed, npages):
    """Memory's block counts, kept through placements, frees and moves, give the same
    range counts, prefix counts, k-th allocated page and pages-not-on-a-node as reading
    the page map."""
    rng = np.random.default_rng(seed)
    m = small_machine(dram_pages=8 * npages, slow_pages=8 * npages, tiers=4)
    mem = Memory(m, npages)
    k = m.nnodes
    for _ in range(6):
        a, b = np.sort(rng.integers(0, npages + 1, 2))
        free = np.flatnonzero(mem.node[a:b] == UNALLOC) + a
        if len(free):  # place the first free run in [a, b)
            e = free[0] + 1
            while e < b and mem.node[e] == UNALLOC:
                e += 1
            mem.place_range(int(free[0]), int(e), int(rng.integers(k)))
        live = np.flatnonzero(mem.node != UNALLOC)
        if len(live):
            pg = rng.choice(live, size=min(len(live), int(rng.integers(1, 400))), replace=False)
            mem.move(pg, mem.node[pg].copy(), rng.integers(0, k, len(pg)).astype(np.uint8))
        if rng.random() < 0.3:
            a, b = np.sort(rng.integers(0, npages + 1, 2))
            mem.release_range(int(a), int(b))
    s, e = np.sort(rng.integers(0, npages + 1, (2, 30)), axis=0)
    ref = np.array([[np.count_nonzero(mem.node[x:y] == i) for i in range(k)]
                    for x, y in zip(s, e)]).reshape(-1, k)
    assert np.array_equal(mem.range_counts(s, e), ref)
    assert np.array_equal(mem.allocated_before(e), np.array(
        [np.count_nonzero(mem.node[:y] != UNALLOC) for y in e]))
    live = np.flatnonzero(mem.node != UNALLOC)
    if len(live):
        g = rng.integers(0, len(live), 10)
        assert np.array_equal(mem.select_allocated(g), live[g])
    for i in range(k):
        assert np.array_equal(mem.pages_of(i), np.flatnonzero(mem.node == i))
    nodes = rng.integers(0, k, len(s))
    got, part = mem.pages_not_on(s, e, nodes)
    want = [np.flatnonzero((mem.node[x:y] != UNALLOC) & (mem.node[x:y] != n)) + x
            for x, y, n in zip(s, e, nodes)]
    assert np.array_equal(got, np.concatenate(want).astype(np.int64))
    assert np.array_equal(part, np.repeat(np.arange(len(s)), [len(w) for w in want]))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_migrate_ranges_is_migrate_of_the_page_list(seed):
    """Regions moved whole (IDT's) in one pass over their pages: the same pages moved,
    in the same order (rates summed alike), and the same state, as listing them;
    overlapping regions take the page-list path."""
    from tierlab.field import range_pages
    rng = np.random.default_rng(seed)
    a, b = _fresh(), _fresh()
    n = a.mem.npages
    cuts = np.unique(rng.integers(0, n + 1, 40))
    s, e = cuts[:-1:2], cuts[1::2]
    k = min(len(s), len(e))
    order = rng.permutation(k)
    s, e = s[:k][order], e[:k][order]
    a.lru.activate(np.arange(0, n, 3))
    b.lru.activate(np.arange(0, n, 3))
    for dst in (1, 0, 1):
        if rng.random() < 0.3:  # overlapping: the fallback
            s, e = np.append(s, s[0]), np.append(e, e[0] + 1)
        got_a = a.migrate(range_pages(s, e), dst, reason="x")
        got_b = b.migrate_ranges(s, e, dst, reason="x")
        assert got_a == got_b > 0
        np.testing.assert_array_equal(a.mem.node, b.mem.node)
        np.testing.assert_array_equal(a._reads, b._reads)
        np.testing.assert_array_equal(a._writes, b._writes)
        for x, y in ((a.mem.used, b.mem.used), (a.mem.blocks, b.mem.blocks),
                     (a.lru.nr_active, b.lru.nr_active), (a._epoch, b._epoch),
                     (a._copy, b._copy)):
            np.testing.assert_array_equal(x, y)
        for f in ("promotions", "demotions", "pingpong", "migrated_bytes", "by_reason"):
            assert getattr(a.stats, f) == getattr(b.stats, f), f
        check_invariants(b)
    # up to the target's room: the leading pages, region by region
    s, e = np.array([0, 3000]), np.array([900, n])
    got_a = a.migrate(range_pages(s, e), 0, reason="y")
    assert b.migrate_ranges(s, e, 0, reason="y") == got_a > 0
    np.testing.assert_array_equal(a.mem.node, b.mem.node)
    np.testing.assert_array_equal(a._reads, b._reads)
    assert b.mem.free[0] == b.mem.wmark_min[0]


def test_the_policy_is_told_the_policy_machine():
    """`Simulation.policy_machine`: what the policy's view calls the machine (a mirror
    of a real run gives what that backend's topology said); the physics keeps its own."""
    from dataclasses import replace
    sim = _fresh()
    assert sim.policy_view.machine is sim.machine
    told = replace(sim.machine, name="told",
                   tiers=[replace(t, read_lat_ns=3 * t.read_lat_ns) for t in sim.machine.tiers])
    sim.policy_machine = told
    assert sim.policy_view.machine is told and sim.machine.name == "small"
    assert sim._lat_r[1] == small_machine().read_latency_ns(1)
