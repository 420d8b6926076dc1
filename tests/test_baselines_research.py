"""Research tiering baselines: MULTI-CLOCK, Intel Tiering-0.8, AutoTiering.

Each policy's distinctive rule is pinned on a small machine whose cold pages are never
touched (so that recency/frequency signals are clean); then the usual sanity checks:
invariants, determinism, and static < policy <= oracle on gups:hotset at small scale.
"""
from __future__ import annotations

import numpy as np
import pytest

import tierlab
from tierlab.engine import Simulation
from tierlab.engine.lru import PROMOTE
from tierlab.errors import TierlabError
from tierlab.policies import ALLOCS, POLICIES
from tierlab.policies.autotiering import match_levels
from tierlab.policies.tiering08 import rate_limit_window

from conftest import HotCold
from test_engine import check_invariants, simulate, small_machine

POLICIES_UNDER_TEST = ["multi-clock", "tiering-0.8", "autotiering"]
NEVER = 1 - 1e-9  # hot_frac: the cold pages are (essentially) never touched
HOT0 = 4096 - 512  # first hot page of the HotCold workloads below


def _sim(policy, alloc="dram-preferred", tiers=2, seed=0, **wl):
    m = small_machine(dram_pages=1024, slow_pages=8192, tiers=tiers)
    params = {"n": 4096, "hot": 512, "hot_frac": NEVER, "work": 1e9}
    params.update(wl)
    w = HotCold(**params)
    sim = Simulation(m, w, POLICIES.create(policy), ALLOCS.create(alloc), seed=seed)
    return sim, w


def _start(sim, w):
    """What run() does before its loop: attach the policy, first-touch the pages."""
    sim.policy.attach(sim)
    sim._apply_change(next(iter(w.changes())))


def _advance(sim, dt):
    sim._advance(sim.now + dt, sim.throughput())


# ---------------------------------------------------------------------------------
# MULTI-CLOCK
# ---------------------------------------------------------------------------------
def test_multiclock_promotes_only_pages_referenced_while_active():
    sim, w = _sim("multi-clock,scan_min=4KiB")
    _start(sim, w)
    lru, pol = sim.lru, sim.policy
    a, b = HOT0 + 16, HOT0 + 116  # hot pages, first touched on the slow node
    assert sim.node_of([a, b]).tolist() == [1, 1]
    lru.activate([a])
    _advance(sim, 0.5)
    pol.kpromoted(sim.now)
    assert sim.node_of([a])[0] == 0, "referenced while active: promoted at this pass"
    assert sim.node_of([b])[0] == 1, "referenced while inactive: not promoted"
    assert lru.is_active([b])[0], "referenced while inactive: activated"
    assert pol.counts["joined_promote"] == 1
    assert not (lru.flags & PROMOTE).any(), "the promote list is drained each pass"
    _advance(sim, 0.5)
    pol.kpromoted(sim.now)
    assert sim.node_of([b])[0] == 0, "active and referenced again: promoted next pass"
    assert not (lru.flags & PROMOTE).any()
    check_invariants(sim)


def test_multiclock_drains_the_promote_list_even_without_room():
    sim, w = _sim("multi-clock,make_room=no,scan_min=4KiB")
    _start(sim, w)
    lru, pol = sim.lru, sim.policy
    hot = np.arange(HOT0, HOT0 + 64)
    lru.activate(hot)
    _advance(sim, 0.5)
    pol.kpromoted(sim.now)
    assert pol.counts["joined_promote"] == 64
    assert (sim.node_of(hot) == 1).all(), "DRAM is full and make_room is off"
    assert pol.counts["promote_failed"] == 64
    assert not (lru.flags & PROMOTE).any()
    assert lru.is_active(hot).all(), "pages that could not move go back to active"


def test_multiclock_four_tiers_promotes_to_the_top_node():
    sim, w = _sim("multi-clock,scan_min=4KiB", tiers=4)
    _start(sim, w)
    slow_hot = np.arange(HOT0, HOT0 + 32)
    src = sim.node_of(slow_hot)
    assert (src >= 2).all()
    sim.lru.activate(slow_hot)
    _advance(sim, 0.5)
    sim.policy.kpromoted(sim.now)
    assert (sim.node_of(slow_hot) == 0).all()
    check_invariants(sim)


# ---------------------------------------------------------------------------------
# AutoTiering
# ---------------------------------------------------------------------------------
def test_match_levels_is_the_sequential_greedy():
    ok, idx = match_levels([8, 3, 8, 2], [1, 1, 5])
    assert ok.tolist() == [True, True, True, False] and idx.tolist() == [0, 1, 2]
    ok, _ = match_levels([1, 8], [1, 2])
    assert ok.tolist() == [False, True]
    ok, _ = match_levels([5, 1, 5, 5], [2, 2, 6])
    assert ok.tolist() == [True, False, True, False]
    ok, _ = match_levels([8, 8], [])
    assert not ok.any()


def test_autotiering_history_shifts_at_each_scan():
    sim, w = _sim("autotiering,background=no")
    _start(sim, w)
    pol = sim.policy
    _advance(sim, 1.0)
    pol.tick(sim.now)  # first scan step: everything present -> shift in 1
    assert (pol.hist[:4096] == 0xFF).all()
    assert pol.scanner.is_armed(np.arange(4096)).all(), "AutoNUMA arms every node"
    _advance(sim, 1.0)
    pol.tick(sim.now)  # cold pages still PROT_NONE -> 0; hot ones faulted -> 1
    assert (pol.level(np.arange(0, 1000)) == 7).all()
    assert (pol.level(np.arange(HOT0, 4096)) == 8).all()


def test_autotiering_cpm_does_not_promote_into_a_full_fast_node():
    m = small_machine(dram_pages=1024, slow_pages=8192)
    sim, rec = simulate(m, HotCold(n=4096, hot=512, hot_frac=NEVER, work=1e9),
                        "autotiering:cpm")
    st = rec["policy_stats"]
    assert st["hint_faults"] > 0 and st["failed"] > 0
    assert rec["promotions"] == 0 and rec["demotions"] == 0
    # with room (PM-preferred leaves DRAM empty) CPM does promote
    sim, rec = simulate(m, HotCold(n=4096, hot=512, hot_frac=NEVER, work=1e9),
                        "autotiering:cpm", alloc="pm-preferred")
    assert rec["promotions"] > 0 and rec["demotions"] == 0


def test_autotiering_opm_demotes_colder_pages_to_promote():
    m = small_machine(dram_pages=1024, slow_pages=8192)
    sim, rec = simulate(m, HotCold(n=4096, hot=512, hot_frac=NEVER, work=1e9),
                        "autotiering:opm,background=no")
    st = rec["policy_stats"]
    assert st["demoted_ondemand"] > 0 and st["promoted_ondemand"] > 0
    assert (sim.node_of(np.arange(HOT0, 4096)) == 0).all(), "the hot set ends in DRAM"
    assert rec["tier_access_share"]["dram"] > 0.85
    check_invariants(sim)
    # the background variant (default) gets there too, through its reserved pool
    sim, rec = simulate(m, HotCold(n=4096, hot=512, hot_frac=NEVER, work=1e9),
                        "autotiering")
    assert rec["policy_stats"]["promoted_pool"] > 0
    assert rec["policy_stats"]["demoted_background"] > 0
    assert (sim.node_of(np.arange(HOT0, 4096)) == 0).all()


def test_autotiering_pool_promotes_only_pages_above_the_lowest_level():
    """wakeup_kdemoted: a fault is promoted through the reserved pool only if its page's
    level is above the lowest level among the target's pages (else LOW_FREQ_FAIL);
    kdemoted never demotes a page at the top level."""
    sim, w = _sim("autotiering")
    _start(sim, w)
    pol = sim.policy
    fast = np.flatnonzero(sim.node_of(np.arange(4096)) == 0)
    slow = np.flatnonzero(sim.node_of(np.arange(4096)) == 1)[:64]
    assert len(fast) and len(slow)
    pol.hist[:] = 0xFF  # every page touched at each of the last 8 scans
    left, woke = pol._from_pool(slow, 1.0)
    assert left.tolist() == slow.tolist() and pol.counts["low_freq_fail"] == 64
    assert not woke, "no qualified fault, kdemoted stays asleep"
    pol._kdemoted(1.5, 16)  # kdemoted with copy budget and only level-8 victims
    assert pol.counts["demoted_background"] == 0, "level-8 pages are never demoted"
    pol.hist[fast[:100]] = 0x0F  # level 4 in DRAM: faults at levels 5..8 qualify
    pol.hist[slow[:32]] = 0x07  # level 3: not above the lowest
    pol._cand = None  # the LAP lists are re-listed (every `refresh` in a run)
    left, woke = pol._from_pool(slow, 2.0)
    assert woke and left.tolist() == slow[:32].tolist()
    assert (sim.node_of(slow[32:]) == 0).all()
    assert pol.counts["low_freq_fail"] == 96 and pol.counts["promoted_pool"] == 32
    assert pol.counts["demoted_background"] >= 32
    assert (sim.node_of(fast[:100]) == 1).sum() >= 32, "the level-4 pages went down"
    check_invariants(sim)
    pol._candidates = lambda node, now, want: np.zeros(0, np.int64)  # empty LAP lists
    left, woke = pol._from_pool(slow[:32], 3.0)
    assert not woke and len(left) == 32, "no tracked page in DRAM: bt_lv = 9"


def test_autotiering_exchange_keeps_fast_node_usage_constant():
    sim, w = _sim("autotiering:exchange")
    pol = sim.policy
    used = []
    tick = pol.tick

    def spy(now):
        tick(now)
        used.append(int(sim.mem.used[0]))

    pol.tick = spy
    rec = sim.run()
    assert pol.counts["exchanged"] >= 500
    assert len(set(used)) == 1, "every promotion is paired with a demotion"
    assert rec["promotions"] == rec["demotions"] == pol.counts["exchanged"]
    assert (sim.node_of(np.arange(HOT0, 4096)) == 0).all()
    check_invariants(sim)


@pytest.mark.parametrize("reserve,pages", [(None, 16 * 8), ("4/cpu", 4 * 8), ("10%", 102),
                                           ("32KiB", 8)])
def test_autotiering_reserved_pool_size(reserve, pages):
    """The code's pool is 16 base pages per CPU (MAX_NR_FREE_PAGES); a share of the
    node or a size are options."""
    spec = "autotiering" + (f",reserve={reserve}" if reserve else "")
    sim, w = _sim(spec)
    _start(sim, w)
    assert sim.app_threads == 8 and sim.policy.reserve == pages


@pytest.mark.parametrize("bad", ["1.5/cpu", "x/cpu", "-1/cpu", "101%"])
def test_autotiering_bad_reserve(bad):
    with pytest.raises(TierlabError, match="autotiering reserve"):
        POLICIES.create(f"autotiering,reserve={bad}")


def test_autotiering_bad_mode():
    with pytest.raises(TierlabError, match="valid: cpm, opm, exchange"):
        POLICIES.create("autotiering:fast")


# ---------------------------------------------------------------------------------
# Tiering-0.8
# ---------------------------------------------------------------------------------
def test_tiering08_scans_only_slow_nodes():
    sim, w = _sim("tiering-0.8")
    _start(sim, w)
    _advance(sim, 1.0)
    sim.policy.scanner.tick(sim.now)
    armed = sim.policy.scanner.is_armed(np.arange(4096))
    node = sim.node_of(np.arange(4096))
    assert armed[node == 1].all() and not armed[node == 0].any()


@pytest.mark.parametrize("policy", ["tiering-0.8", "autotiering"])
def test_numa_scanner_hands_over_each_fault_at_the_next_tick(policy):
    """The scanner's faults come from the fault calendar: each tick returns exactly the
    faults since the previous one (fault times in (previous tick, now], by time, with
    latency = fault time - scan time), also for pages armed long ago (the scanner
    before 2026-11-28 polled those every age / 8 and handed their faults over late)."""
    sim, w = _sim(policy, hot_frac=1 - 1e-6)  # cold pages: one access in ~40 s
    _start(sim, w)
    sc = sim.policy.scanner
    armed_at = np.full(sim.mem.npages, np.nan)
    prev, seen, late_armed = 0.0, 0, 0
    for _ in range(320):  # 80 s: two scan passes and more
        _advance(sim, 0.25)
        now = sim.now
        before = sc.is_armed(np.arange(sim.mem.npages))
        pages, times, lat = sc.tick(now)
        assert ((times > prev) & (times <= now)).all()
        assert (np.diff(times) >= 0).all()
        assert before[pages].all()
        np.testing.assert_allclose(times - lat, armed_at[pages], rtol=0, atol=1e-9)
        late_armed += int((now - armed_at[pages] > 8.0).sum())
        seen += len(pages)
        armed_at[pages] = np.nan
        newly = np.flatnonzero(sc.is_armed(np.arange(sim.mem.npages)) & np.isnan(armed_at))
        armed_at[newly] = now
        prev = now
    assert seen > 1000 and late_armed > 0, (seen, late_armed)


def _scan_range_in_one_read(sc, start, end):
    """The scan step's pages as it read them before `_scan_range` (all of [start, end)
    at once, then cut after the range that passed the budget)."""
    idx = np.flatnonzero(sc.eligible[sc.sim.mem.node[start:end]]) + start
    armed = sc.is_armed(idx)
    new = ~armed
    if new.any():
        b = idx[new] // sc.BLOCK
        blocks = b[np.concatenate(([True], b[1:] != b[:-1]))]
        limit = -(-sc.scan_pages // sc.BLOCK)
        if len(blocks) > limit:
            end = int(blocks[limit - 1] + 1) * sc.BLOCK
            keep = idx < end
            idx, armed, new = idx[keep], armed[keep], new[keep]
    return idx, armed, new, end


@pytest.mark.parametrize("seed", range(12))
def test_tiering08_scan_step_reads_in_pieces_as_in_one(seed):
    """A step reads its 8 x scan_size in pieces and stops once a 2 MiB range past the
    budget holds PTEs to change: the same pages, flags and end as one read of it all,
    with budgets met exactly, missed, passed by one range, and ranges already armed."""
    sim, w = _sim("tiering-0.8")
    _start(sim, w)
    sc = sim.policy.scanner
    rng = np.random.default_rng(seed)
    n = sim.mem.npages
    sc.scan_pages = int(rng.choice([300, 512, 1024, 1500]))
    flags = rng.random(n) < rng.choice([0.0, 0.5, 0.97, 1.0])
    flags[: int(rng.integers(0, n))] = True  # long armed runs: ranges without changes
    sc.is_armed = lambda pages: flags[pages]  # the PTE bits, as the step reads them
    for _ in range(20):
        start = int(rng.integers(0, n))
        end = min(n, start + int(rng.integers(1, 8 * sc.scan_pages + 1)))
        want = _scan_range_in_one_read(sc, start, end)
        got = sc._scan_range(start, end)
        for g, x in zip(got[:3], want[:3]):
            np.testing.assert_array_equal(g, x)
        assert got[3] == want[3]


def test_tiering08_hot_threshold_on_fault_latency():
    sim, w = _sim("tiering-0.8")
    _start(sim, w)
    pol = sim.policy
    assert not pol._enough_free(), "DRAM filled by first touch"
    hot, cold = np.arange(2000, 2010), np.arange(2100, 2110)
    pages = np.concatenate((hot, cold))
    t = np.full(20, 0.5)
    lat = np.concatenate((np.full(10, 0.1), np.full(10, 2.0)))  # threshold 1 s
    pol._handle(pages, t, lat, 0.5)
    assert (sim.node_of(hot) == 0).all() and (sim.node_of(cold) == 1).all()
    assert pol.counts["not_hot"] == 10 and pol.counts["promoted"] == 10
    check_invariants(sim)


def test_tiering08_rate_limit():
    sim, w = _sim("tiering-0.8,rate_limit=400KiB,scan_demoted=no")  # 100 pages/s
    _start(sim, w)
    pol = sim.policy
    pages = np.arange(1100, 1400)
    pol._handle(pages, np.linspace(2.0, 2.5, 300), np.full(300, 0.01), 2.5)
    assert pol.counts["promoted"] == 100 and pol.counts["rate_limited"] == 200
    more = np.arange(1500, 1550)
    pol._handle(more, np.linspace(3.1, 3.2, 50), np.full(50, 0.01), 3.2)
    assert pol.counts["promoted"] == 150, "the next second has a fresh budget"
    assert (sim.node_of(more) == 0).all()
    check_invariants(sim)


def test_rate_limit_window_carries_counts():
    state = [-1, 0]
    ok = rate_limit_window([0.1, 0.2, 0.3], [True, True, True], 2, state)
    assert ok.tolist() == [True, True, False]
    ok = rate_limit_window([0.9, 1.1], [True, True], 2, state)
    assert ok.tolist() == [False, True]


def test_tiering08_threshold_adjustment():
    sim, w = _sim("tiering-0.8")
    _start(sim, w)
    pol = sim.policy
    ref = pol.limit_pages * pol.scan_period_max
    pol.cand_interval = int(2 * ref)  # far more candidates than the rate limit allows
    pol._adjust_threshold()
    assert pol.th == pytest.approx(1.0 - 0.125)
    pol.cand_interval = 0  # too few: raise, quicker
    pol._adjust_threshold()
    assert pol.th == pytest.approx(1.0 + 0.125)
    for _ in range(20):
        pol._adjust_threshold()
    assert pol.th == pytest.approx(2.0), "at most twice the default"


# ---------------------------------------------------------------------------------
# common properties
# ---------------------------------------------------------------------------------
@pytest.mark.parametrize("policy", POLICIES_UNDER_TEST)
@pytest.mark.parametrize("tiers,alloc", [(2, "dram-preferred"), (4, "pm-preferred"),
                                         (2, "dram-always"), (4, "pm-always")])
def test_invariants_hold(policy, tiers, alloc):
    m = small_machine(dram_pages=900, slow_pages=3000, tiers=tiers)
    wl = HotCold(n=3000, hot=300, phases=3, grow=400, free_first=200, work=2e7)
    sim, rec = simulate(m, wl, policy, alloc, seed=3)
    check_invariants(sim)
    assert sim.mem.allocated == 3000 + 400 - 200
    assert rec["work"] == pytest.approx(wl.total_work)


@pytest.mark.parametrize("policy", POLICIES_UNDER_TEST)
def test_same_seed_same_result(policy):
    m = small_machine(tiers=4)
    recs = [simulate(m, HotCold(phases=3, work=2e7), policy, seed=5)[1] for _ in range(2)]
    for r in recs:
        r.pop("wall_seconds")
    assert recs[0] == recs[1]


_RUNS: dict = {}
# AutoTiering ranks pages by how many of the last 8 NUMA scans found them touched. With
# gups:hotset's default 10% of updates on the cold part, every cold page is touched
# between two passes of the scanner (a pass takes about 30 s), so every page is at level
# 8 and the code's rule (wakeup_kdemoted: the faulting page must be above the lowest
# level) promotes nothing into a full DRAM. With 0.1% the cold pages' levels decay.
_HOT_FRAC = {"autotiering": 0.999}


def _gups(machine, policy, alloc, hot_frac=0.9):
    key = (machine, policy, alloc, hot_frac)
    if key not in _RUNS:
        _RUNS[key] = tierlab.run(machine=machine, workload=f"gups:hotset,hot_frac={hot_frac}",
                                 policy=policy, alloc=alloc, scale=1 / 64)
    return _RUNS[key]


@pytest.mark.parametrize("policy", POLICIES_UNDER_TEST)
@pytest.mark.parametrize("machine", ["optane-2tier", "optane-4tier"])
@pytest.mark.parametrize("alloc", ["dram-preferred", "pm-preferred"])
def test_between_static_and_oracle_on_gups_hotset(policy, machine, alloc):
    f = _HOT_FRAC.get(policy, 0.9)
    thr = _gups(machine, policy, alloc, f)["throughput"]
    assert thr > 1.01 * _gups(machine, "static", alloc, f)["throughput"]
    assert thr <= 1.005 * _gups(machine, "oracle", alloc, f)["throughput"]
