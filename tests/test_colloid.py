"""Colloid (SOSP'24) on HeMem and on upstream Linux tiering: the latency view, the target
shift, the pair choice, the artifact's rules (HeMem's load-only samples at 5003; mode 6's
hotness by hint-fault latency alone), and the paper's shape: no harm unloaded, a gain
once an antagonist loads the default tier."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import tierlab
from tierlab.policies.colloid import BinarySearch, delta_p_closed, pick_pairs
from tierlab.policies import colloid


@pytest.mark.parametrize("o_d, o_a, i_d, i_a", [(900.0, 300.0, 6.0, 2.0),
                                                (100.0, 500.0, 3.0, 5.0)])
def test_closed_form_is_the_artifacts_counter_expression(o_d, o_a, i_d, i_a):
    """COLLOID_EXPR3 in counters: |O_D - b O_A| / ((I_D + I_A)(b O_A / I_A + O_D / I_D)),
    b = I_D / I_A; in latencies p (1-p) |L_D - L_A| / ((1-p) L_D + p L_A)."""
    b = i_d / i_a
    code = abs(o_d - b * o_a) / ((i_d + i_a) * (b * o_a / i_a + o_d / i_d))
    p = i_d / (i_d + i_a)
    assert delta_p_closed(o_d / i_d, o_a / i_a, p) == pytest.approx(code)
    assert delta_p_closed(100.0, 100.0, 0.7) == 0.0


def test_binary_search_narrows_toward_equal_latencies():
    s = BinarySearch()
    assert s(100.0, 103.0, 0.5) == 0.0  # within 5%: done
    assert s(100.0, 200.0, 0.5) == pytest.approx(0.25)  # default faster: toward [0.5, 1]
    assert s(300.0, 100.0, 0.7) == pytest.approx(0.1)  # overshot: [0.5, 0.7] -> 0.6


def test_pairs_take_the_largest_difference_within_the_remaining_shift():
    src = np.array([0.30, 0.20, 0.05])  # the higher-latency tier's pages
    dst = np.array([0.01, 0.10, 0.25])
    # dp 0.25: 0.30 - 0.10 = 0.20 is the largest difference <= 0.25 (0.30 - 0.01 > dp)
    assert pick_pairs(src, dst, 0, 0.25, 1) == [(0, 1)]
    # then 0.05 left: 0.05 - 0.01 = 0.04
    assert pick_pairs(src, dst, 0, 0.25, 5) == [(0, 1), (2, 0)]
    # a free frame is a partner of share 0, preferred at equal difference
    assert pick_pairs(np.array([0.2]), np.array([0.0]), 1, 0.5, 3) == [(0, -1)]
    # nothing qualifies: no positive difference within dp
    assert pick_pairs(np.array([0.1]), np.array([0.2]), 0, 0.5, 3) == []


def _run(policy, antagonist):
    m = "dram-cxl:dram=24GiB,cxl=96GiB,cxl_lat=135ns" + (
        f",antagonist=dram@{antagonist}" if antagonist else "")
    return tierlab.run(machine=m, workload="gups:hotset,size=72GiB,hot=20GiB,threads=15",
                       policy=policy, scale=1 / 64)


def test_colloid_balances_loaded_latency_under_an_antagonist():
    hemem, colloid = _run("hemem", "75%"), _run("colloid-hemem", "75%")
    last = colloid["policy_stats"]["colloid_last"]
    # the default tier's loaded latency is brought to the alternate tier's
    assert last["L_D"] == pytest.approx(last["L_A"], rel=0.15)
    assert colloid["policy_stats"]["colloid_shifts"]["down"] > 0
    assert colloid["tier_access_share"]["dram"] < hemem["tier_access_share"]["dram"]
    assert colloid["throughput"] > 1.2 * hemem["throughput"]
    for r in (hemem, colloid):
        assert r["migrated_bytes"] <= 20 * r["footprint_bytes"]


def test_colloid_tpp_is_upstream_tiering_unloaded_and_demotes_hot_pages_under_load():
    """The artifact's "TPP" is Linux 6.3 memory tiering (numa_balancing=2); Colloid
    (mode 6) is on/off: no antagonist, L_D < L_A, it never turns on and promotes as
    tiering does; with the default tier loaded it refuses promotions and demotes hot
    default-tier pages until the loaded latencies meet."""
    base0, col0 = _run("autonuma-tiering", None), _run("colloid-tpp", None)
    assert col0["policy_stats"]["colloid_on_polls"] == 0
    assert col0["tier_access_share"]["dram"] > 0.9 * base0["tier_access_share"]["dram"]
    base3, col3 = _run("autonuma-tiering", "75%"), _run("colloid-tpp", "75%")
    assert col3["policy_stats"]["colloid_demoted"] > 0
    assert col3["tier_access_share"]["dram"] < base3["tier_access_share"]["dram"]
    assert col3["throughput"] > 1.2 * base3["throughput"]


def test_colloid_tpp_hotness_is_hint_fault_latency_alone():
    """Mode 6 (no NORMAL bit): a faulting default-tier page is hot when its hint-fault
    latency is under the hot threshold; the active LRU does not count (fair.c
    `numa_migrate_memory_away_target`). Of an active page faulting late and an
    inactive one faulting early, only the second is demoted; no slow page promotes."""
    from test_engine import small_machine
    from conftest import HotCold
    from tierlab.engine import Simulation
    from tierlab.policies import ALLOCS, POLICIES
    sim = Simulation(small_machine(), HotCold(n=2048, hot=256, work=1e9),
                     POLICIES.create("colloid-tpp"), ALLOCS.create("dram-preferred"))
    pol = sim.policy
    pol.attach(sim)
    sim.mem.place_range(0, 1000, 0)
    sim.mem.place_range(1000, 1100, 1)
    pol.view.update = lambda: None
    pol.view.state = lambda: (300.0, 200.0, 0.9)  # L_D > L_A: Colloid on
    sim.lru.activate(np.array([10]))
    assert sim.lru.is_active(np.array([10, 20])).tolist() == [True, False]
    th = pol.threshold()
    pages = np.array([10, 20, 1050])
    pol.on_faults(pages, np.array([1.0, 1.0, 1.0]), np.array([2 * th, th / 10, th / 10]),
                  1.0)
    sim._land(float("inf"))  # the demotion in the faulting thread, once copied
    assert sim.mem.node[pages].tolist() == [0, 1, 1]
    assert pol.colloid_on and pol.demoted_hot == 1 and pol.promoted == 0


def test_colloid_hemem_samples_loads_only_at_the_artifacts_period():
    """Colloid's HeMem fork samples the two load events at period 5003 and no stores
    (src/pebs.h); its counts hold no store sample, where HeMem's do."""
    from tierlab.policies import POLICIES
    col, hem = POLICIES.create("colloid-hemem"), POLICIES.create("hemem")
    assert col.period == {"fast_load": 5003, "slow_load": 5003, "store": 10007}
    assert not col.count_stores and hem.count_stores and hem.period["fast_load"] == 10007
    got = {}
    for p in ("hemem", "colloid-hemem"):
        sim = tierlab.api.simulation("dram-cxl", "gups:hotset,size=8GiB,hot=1GiB", p,
                                     scale=1 / 64)
        sim.run()
        got[p] = int(sim.policy.writes.sum()), int(sim.policy.reads.sum())
    assert got["colloid-hemem"][0] == 0 and got["colloid-hemem"][1] > 0
    assert got["hemem"][0] > 0


def _pick_pairs_brute(p_src, p_dst, free_slots, dp, most):
    """The pair rule by brute force: for each unused i its partner is the unused j of
    smallest share >= p_i - left (equal shares: lowest j), or a free frame (share 0,
    chosen on a tie); the pair of largest difference in (0, left] goes first (equal
    differences: lowest i)."""
    used_s, used_d, pairs, left = set(), set(), [], dp
    while len(pairs) < most and left > 0:
        best = None
        for i, p in enumerate(p_src):
            if i in used_s:
                continue
            ok = [(p_dst[j], j) for j in range(len(p_dst))
                  if j not in used_d and p_dst[j] >= p - left]
            share, j = min(ok) if ok else (np.inf, None)
            diff = p - share if share < p else -np.inf
            if free_slots > 0 and 0 < p <= left and p >= diff:
                diff, j = p, -1
            if np.isfinite(diff) and (best is None or diff > best[0]):
                best = (diff, i, j)
        if best is None or best[0] <= 0:
            break
        diff, i, j = best
        pairs.append((i, j))
        if j == -1:
            free_slots -= 1
        else:
            used_d.add(j)
        used_s.add(i)
        left -= float(diff)
    return pairs


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 60), st.integers(0, 80), st.integers(0, 4), st.floats(0.0, 1.5),
       st.integers(1, 30), st.integers(0, 2**32 - 1))
def test_pick_pairs_equals_resorting_every_pair(ns, nd, free, dp, most, seed):
    """pick_pairs (one sorted array of unused partners, each pair removing its own)
    follows the rule as a brute force states it: the same pairs in the same order,
    ties, zero and infinite shares included."""
    rng = np.random.default_rng(seed)
    grid = np.array([0.0, 0.01, 0.02, 0.05, 0.1, 0.2, np.inf])
    src = rng.choice(grid[:-1], ns) if ns % 2 else rng.random(ns) * 0.3
    dst = rng.choice(grid, nd) if nd % 2 else rng.random(nd) * 0.3
    assert pick_pairs(src, dst, free, dp, most) == \
        _pick_pairs_brute(src, dst, free, dp, most)


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 300), st.integers(0, 40), st.booleans(), st.integers(0, 4),
       st.floats(0.0, 0.5), st.integers(1, 30), st.integers(0, 2**32 - 1))
def test_pairs_from_hemem_counts_sorted_as_counted(nh, maxc, down, free, dp, most, seed):
    """Colloid-on-HeMem's pairs from the lists `TierShares` counts out of the integer
    counts (positive sources, partners in ascending share) are the pages the rule
    pairs from every page's share, sorting itself, with zero-count partners made
    infinite going down; also when a count is past the counting sort's table."""
    from tierlab.policies.hemem import DRAM, MAX_SHIFT, NONE, NVM
    rng = np.random.default_rng(seed)
    tier = rng.choice(np.array([NONE, DRAM, NVM], dtype=np.uint8), nh)
    reads = rng.integers(0, maxc + 1, nh)
    writes = rng.integers(0, 3, nh)
    if seed % 5 == 0 and nh:  # one count the counting sort does not take
        reads[rng.integers(0, nh)] = colloid.TierShares.COUNTS + int(rng.integers(0, 50))
    clk = np.zeros(nh, np.int64)
    src_tier, dst_tier = (DRAM, NVM) if down else (NVM, DRAM)
    c = np.where(tier != NONE, reads + writes, 0).astype(float)  # tracked pages
    share = c / c.sum() if c.sum() > 0 else np.zeros(nh)
    all_src, all_dst = np.flatnonzero(tier == src_tier), np.flatnonzero(tier == dst_tier)
    p_dst_all = share[all_dst]
    if down:
        p_dst_all = np.where(p_dst_all > 0, p_dst_all, np.inf)
    want = [(all_src[i], -1 if j < 0 else all_dst[j])
            for i, j in pick_pairs(share[all_src], p_dst_all, free, dp, most)]
    total, src, p_src, src_up, dst, p_dst = colloid.TierShares()(
        tier, reads, writes, clk, 0, MAX_SHIFT, NONE, src_tier, dst_tier,
        zero_partners=not down)
    got = [(src[i], -1 if j < 0 else dst[j]) for i, j in pick_pairs(
        p_src, p_dst, free, dp, most, order=(src_up, np.arange(len(p_dst))))]
    assert got == want


@pytest.mark.parametrize("scale", [1.0, 1 / 8, 1 / 64])
def test_a_miniature_swaps_its_share_of_the_artifacts_pairs(scale):
    """The artifact's loop swaps pairs while under its byte limit, so at least one a
    loop (pebs.c): ceil(limit / 4 MiB) pairs. A 1/F miniature swaps 1/F of them, the
    fraction of a pair carried from loop to loop: 64 loops of a 1.7 MB limit are 64
    pairs at full scale, 8 at 1/8 and 1 at 1/64; 10 MB a loop is 3 pairs a loop."""
    from tierlab.policies import POLICIES
    pol = POLICIES.create("colloid-hemem")
    pol.sim = type("S", (), {"scaled_bytes": staticmethod(lambda b: b * scale)})()
    pol.view = type("V", (), {})()
    for mb, pairs in ((1.7, 1), (10.0, 3)):
        pol._credit = 0.0
        pol.view.traffic = mb * 1e6 * scale / 64 / 0.5  # dp x traffic x 64 B = mb (full)
        got = sum(pol._pairs_allowed(0.5) for _ in range(64))
        assert got == round(64 * pairs * scale)
    pol.view.traffic = 0.0
    assert pol._pairs_allowed(0.5) == 0
