"""Linux NUMA-balancing baselines: the `hint-faults` scanner, `pte-scan`, `autonuma`,
`autonuma-tiering`, `autonuma-tiering-mglru` and `tpp`.

Each kernel rule is pinned on a small setup (calling the policy's pieces directly where
the rule is a decision), then the sanity checks: invariants, determinism, and
static < policy <= oracle on gups:hotset at small scale.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

import tierlab
from tierlab.engine import Simulation
from tierlab.engine.timeline import Timeline
from tierlab.field import RateField
from tierlab.monitors import HintFaults, RateSource
from tierlab.monitors import hint_faults
from tierlab.monitors.hint_faults import NumaScanner, ScheduledHintFaults
from tierlab.monitors.pte_scan import PteScan
from tierlab.policies.autonuma import (AutoNumaTiering, MIN_NR_GENS, cpu_node, promo_wmark,
                                       toptier_nodes)
from tierlab.runs import make_machine
from tierlab.units import PAGE

from test_engine import assert_same_runs, check_invariants, fused_and_apart
from test_monitor_primitives import simple_timeline
from tierlab import jit

SCALE = 1 / 256
TIERING = ["autonuma-tiering", "autonuma-tiering-mglru", "tpp"]


def started(policy, alloc="dram-preferred", machine="optane-2tier", scale=SCALE,
            workload="gups:hotset", seed=0):
    """A simulation after what run() does before its loop (attach, first touch)."""
    sim = tierlab.api.simulation(machine=machine, workload=workload, policy=policy,
                                 alloc=alloc, seed=seed, scale=scale)
    sim.policy.attach(sim)
    sim._apply_change(next(iter(sim.workload.changes())))
    return sim


def advance(sim, t):
    sim._advance(t, sim.throughput())


def landed(sim):
    """`sim` once the promotions its faulting threads are copying have landed (they
    land over the copies' stall, `Simulation._land`, which a run's loop advances)."""
    sim._land(math.inf)
    return sim


# -----------------------------------------------------------------------------------
# Hint faults scheduled in work
# -----------------------------------------------------------------------------------
def test_scheduled_hint_faults_equal_the_primitive():
    """Same seed, same arms, same polls: the work-scheduled generator returns the very
    faults of `HintFaults` (the Exp(1) draw is the same; it is solved, not integrated),
    across a stall and a field change."""
    outs = []
    for cls in (HintFaults, ScheduledHintFaults):
        tl = simple_timeline()
        hf = cls(RateSource(tl), np.random.default_rng(5))
        hf.arm(np.arange(1024), 0.1)
        got = [hf.poll(t) for t in np.arange(0.25, 1.51, 0.25)]
        hf.arm(np.arange(512, 2048), 1.5)  # 512..1023 unless faulted: keep 0.1
        got += [hf.poll(t) for t in np.arange(1.75, 4.01, 0.25)]
        outs.append([np.concatenate(x) for x in zip(*got)] + [np.array([hf.armed])])
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    pages, times, lat, _ = outs[1]
    first = pages < 512
    assert np.all(lat[first] == pytest.approx(times[first] - 0.1))
    assert len(pages[pages >= 1024]) == len(np.unique(pages[pages >= 1024]))


@pytest.mark.parametrize("buckets,block", [(1024, 64), (2, 1), (5, 3)])
def test_scheduled_hint_faults_equal_the_primitive_over_many_windows(monkeypatch, buckets,
                                                                    block):
    """A long run through the fault calendar, down to one bucket of one-entry blocks:
    window rolls (the work grows 10^4-fold), stalls, three field changes, re-arms of
    faulted pages and a disarm; every poll returns the primitive's faults."""
    from tierlab.monitors import hint_faults
    monkeypatch.setattr(hint_faults, "CAL_BUCKETS", buckets)
    monkeypatch.setattr(hint_faults, "CAL_BLOCK", block)
    n = 4096
    fields = [RateField([0, 64, 1024], [64, 1024, n], [5e-2, 1e-3, 1e-5], [0.0] * 3, n),
              RateField([0, 512], [512, n], [1e-4, 2e-3], [0.0, 0.0], n),
              RateField([0, 2048], [2048, n], [0.0, 1e-4], [0.0, 0.0], n),
              RateField([0], [n], [1e-3], [0.0], n)]
    tl = Timeline(fields[0])
    t = w = 0.0
    for k in range(200):
        t += 0.5
        w += 0.0 if k % 17 == 5 else 50.0 * (1 + k)  # cumulative work; stalls
        tl.advance(t, w)
        if k in (60, 110, 150):
            tl.set_field(t, fields[(k // 50) % 4])
    outs = []
    for cls in (HintFaults, ScheduledHintFaults):
        rng = np.random.default_rng(11)
        hf = cls(RateSource(tl), np.random.default_rng(7))
        got = []
        for k, now in enumerate(np.arange(0.25, 100.01, 0.25)):
            if k % 8 == 0:
                hf.arm(np.sort(rng.choice(n, 600, replace=False)), now)
            if k == 200:
                hf.disarm(np.arange(0, n, 3))
            got.append(hf.poll(now))
        outs.append([np.concatenate(x) for x in zip(*got)] + [np.array([hf.armed])])
    assert outs[0][0].shape[0] > 2000  # faults through every field
    for a, b in zip(*outs):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)


def test_scheduled_hint_faults_disarm_range():
    tl = simple_timeline()
    hf = ScheduledHintFaults(RateSource(tl), np.random.default_rng(1))
    hf.arm(np.arange(2048), 0.1)
    hf.disarm_range(0, 64)
    assert not hf.is_armed(np.arange(64)).any() and hf.armed == 2048 - 64
    p, _, _ = hf.poll(4.0)
    assert not np.any(p < 64)


# -----------------------------------------------------------------------------------
# The scanner (task_numa_work)
# -----------------------------------------------------------------------------------
def test_scan_bounds_follow_task_scan_min_max():
    sim = started("autonuma-tiering", scale=1 / 64)
    sc = sim.policy.scanner
    # 64 GiB at full scale = 256 windows of 256 MB; the scan size is scaled
    assert sc.scan_pages == 256 * 2**20 // 64 // PAGE
    assert sc.windows() == 256
    assert sc.scan_min() == pytest.approx(0.1)  # 2560 MB/s floor
    assert sc.scan_max() == pytest.approx(60 / 256)


def test_tiering_scan_skips_the_top_tier_and_stops_after_updates():
    sim = started("autonuma-tiering", scale=1 / 64)  # dram-preferred: DRAM first
    sc = sim.policy.scanner
    n, step = sim.mem.npages, sc.scan_pages
    sc.scan_step(1.0)  # 8 x scan_size of DRAM pages: no PTE changed, step ends
    assert sc.hf.armed == 0 and sc.cursor == 8 * step
    while sc.hf.armed == 0:
        sc.scan_step(1.0)
    armed = np.flatnonzero(sc.hf.is_armed(np.arange(n)))
    assert len(armed) <= step
    assert np.all(sim.mem.node[armed] == 1)  # only the slow node
    cur = sc.cursor
    sc.scan_step(1.1)  # the next step arms the next scan_size of slow pages
    assert sc.cursor == min(cur + step, n) and sc.hf.armed == len(armed) + (sc.cursor - cur)


def test_scan_period_adaptation_rules():
    """update_task_scan_period runs from task_numa_placement at the first fault counted
    after numa_scan_seq moved, on what was counted before that fault."""
    sim = started("autonuma-tiering", scale=1 / 64)
    sc = sim.policy.scanner
    sc.period = 0.1
    sc.account(local=9, remote=1, shared=10)  # no pass has ended: counted only
    sc.end_pass(0.0)
    assert sc.period == pytest.approx(0.1)  # the pass ended, no fault since
    sc.account(local=1)  # adapts on what came before: lr = 9 grows it by 2 slots
    assert sc.period == pytest.approx(0.1 + 2 * 0.01)
    sc.account(remote=9, private=1, shared=9)  # no pass ended: no adaptation
    assert sc.period == pytest.approx(0.12)
    sc.end_pass(0.0)
    sc.account(remote=10, private=10)  # lr = ps = 1: shrinks by 6 slots
    assert sc.period == pytest.approx(0.1)  # clamped at task_scan_min
    sc.end_pass(0.0)
    advance(sim, 0.5)
    sc.account(local=9, remote=1, shared=10, failed=1)  # promotions only: local+shared 0
    assert sc.period == pytest.approx(0.2)
    assert sc.next_scan == pytest.approx(0.5 + 0.2)  # numa_next_scan = now + period
    sc.end_pass(0.0)
    sc.account(local=1)  # a failed migration: double
    assert sc.period == pytest.approx(min(0.4, sc.scan_max()))
    sc.end_pass(0.0)
    sc.account()  # nothing counted: not a counted fault, nothing adapts
    assert sc.period == pytest.approx(min(0.4, sc.scan_max()))


def _gap_after_a_step(sc, cost):
    """Seconds from a step that cost its thread `cost` (at the run's scale) to the next."""
    sc.scan_step = lambda now: cost
    due = sc.due()
    sc.tick(due)
    return sc.due() - due


def test_scan_overhead_cap_spaces_steps_by_32x_their_cost():
    """task_numa_work's 3% cap: the scanning thread waits 2 ticks + 32 x the step's own
    runtime more; T threads take turns; the cost is read at full scale; the period is
    the one when the tick checks, numa_next_scan the one when the step ran."""
    def scanner(threads, cap="yes"):
        sc = started(f"autonuma-tiering:overhead_cap={cap}", scale=1 / 64,
                     workload=f"gups:hotset,threads={threads}").policy.scanner
        sc.period = 0.1
        return sc
    assert _gap_after_a_step(scanner(1), 1e-3) == pytest.approx(0.1 + 0.008 + 32 * 64e-3)
    assert _gap_after_a_step(scanner(1), 0.0) == pytest.approx(0.108)
    assert _gap_after_a_step(scanner(8), 1e-3) == pytest.approx((0.108 + 32 * 64e-3) / 8)
    assert _gap_after_a_step(scanner(8), 1e-6) == pytest.approx(0.1)  # the period binds
    assert _gap_after_a_step(scanner(1, "no"), 1e-3) == pytest.approx(0.1)
    sc = scanner(1)
    gap = _gap_after_a_step(sc, 1e-3)
    sc.period = 0.3  # an adaptation after the step: the cap waits for the new period
    assert sc.due() - (sc.next_scan - 0.1) == pytest.approx(gap + 0.2)


@pytest.mark.parametrize("policy", ["autonuma-tiering", "tiering-0.8"])
def test_scan_overhead_cap_slows_a_one_thread_scan(policy):
    """End to end: one thread whose scan steps are dear scans fewer steps than without
    the cap, as many as the cap allows."""
    machine = dataclasses.replace(make_machine("optane-2tier", SCALE), pte_walk_s=2e-6,
                                  pte_update_s=5e-6)
    steps = {}
    for cap in ("yes", "no"):
        rec = tierlab.api.run(machine=machine, workload="gups:hotset,threads=1,updates=4e8",
                              policy=f"{policy}:overhead_cap={cap}", alloc="pm-preferred",
                              scale=SCALE, seed=0)
        steps[cap] = rec["policy_stats"]["scan_steps"]
    assert 0 < steps["yes"] < 0.7 * steps["no"]


def test_hint_fault_monitor_runs_alone_and_charges():
    sim = tierlab.api.simulation(machine="optane-2tier", workload="gups:hotset,updates=2e9",
                                 policy="static", alloc="pm-preferred", scale=SCALE)
    mon = NumaScanner()
    seen = []
    orig = sim.policy.attach

    def attach(s):
        orig(s)
        mon.attach(s)
        mon.subscribe(lambda p, t, lat, now: seen.append((p, t, lat, now)))
    sim.policy.attach = attach
    rec = sim.run()
    assert seen and mon.hf.faults == sum(len(x[0]) for x in seen)
    for p, t, lat, now in seen:
        assert np.all(np.diff(t) >= 0) and np.all(t <= now + 1e-9) and np.all(lat >= 0)
    assert rec["monitor_cpu_seconds"] > 0 and rec["app_stall_seconds"] > 0
    assert mon.stats()["scan_passes"] >= 1


# -----------------------------------------------------------------------------------
# autonuma (numa_balancing = 1)
# -----------------------------------------------------------------------------------
def test_autonuma_fills_the_cpu_node_and_never_demotes():
    sim = tierlab.api.simulation(machine="optane-2tier", workload="gups:hotset,updates=4e9",
                                 policy="autonuma", alloc="pm-preferred", scale=SCALE)
    rec = sim.run()
    check_invariants(sim)
    assert rec["demotions"] == 0 and rec["promotions"] > 0
    mem = sim.mem
    # migrate_balanced_pgdat: promotions stop with high + 1 pages free
    assert mem.free[0] == mem.wmark_high[0] + 1
    ps = rec["policy_stats"]
    assert ps["promote_failed"] > 0 and ps["hint_faults"] > rec["promotions"]
    assert rec["migrations_by_reason"] == {"numa": rec["promotions"]}


def test_autonuma_two_fault_filter_strict_waits_for_a_second_fault():
    sim = started("autonuma,two_fault=strict", alloc="pm-preferred")
    pol = sim.policy
    pages = np.flatnonzero(sim.mem.node == 1)[:100]
    t = np.zeros(100)
    pol.on_faults(pages, t, t, 0.0)
    assert np.all(sim.node_of(pages) == 1) and not sim._landing
    pol.on_faults(pages, t, t, 0.0)
    assert np.all(landed(sim).node_of(pages) == 0)
    sim2 = started("autonuma", alloc="pm-preferred")  # kernel: one CPU node, 1st fault
    sim2.policy.on_faults(pages, t, t, 0.0)
    assert np.all(landed(sim2).node_of(pages) == 0)


# -----------------------------------------------------------------------------------
# autonuma-tiering (numa_balancing = 2)
# -----------------------------------------------------------------------------------
def test_hot_threshold_applies_only_when_the_fast_node_is_short():
    from tierlab.policies.autonuma import ENOUGH, NO_ROOM, PROMOTED, TOO_COLD
    sim = started("autonuma-tiering")  # dram-preferred: DRAM full
    pol = sim.policy
    assert sim.mem.free[0] < pol.enough_mark()
    times = np.linspace(1.0, 1.01, 6)
    lat = np.array([0.2, 1.5, 0.9, 1.0, 3.0, 0.01])
    out, _ = pol.fault_thread(times, lat)
    cand = np.isin(out, [PROMOTED, NO_ROOM])
    assert np.flatnonzero(cand).tolist() == [0, 2, 5]  # latency < 1000 ms
    assert np.all(out[~cand] == TOO_COLD) and pol.too_cold == 3 and pol.nr_cand == 3
    # free space enough (pm-preferred: DRAM empty): everything, threshold reset
    sim = started("autonuma-tiering", alloc="pm-preferred")
    pol = sim.policy
    pol.nbp_threshold = 0.5
    out, _ = pol.fault_thread(times, lat)
    assert np.all(out == ENOUGH) and pol.nbp_threshold == 0 and pol.nr_cand == 0


def test_rate_limit_caps_candidates_per_window():
    from tierlab.policies.autonuma import NO_ROOM, PROMOTED
    # 8 MB/s at full scale = 2048 pages/s; a 1/256 miniature: 8 pages per 1 s window
    sim = started("autonuma-tiering,rate_limit_mbps=8")
    pol = sim.policy
    assert pol.rate_limit == 8
    times = np.sort(np.random.default_rng(0).uniform(1.0, 4.0, 300))
    out, _ = pol.fault_thread(times, np.zeros(300))
    passed = times[np.isin(out, [PROMOTED, NO_ROOM])]
    # windows start at a candidate > 1 s after the previous window's start (the faults
    # are sparse enough that each is taken when it happens)
    starts = [times[0]]
    for t in times:
        if t - starts[-1] > 1.0:
            starts.append(t)
    win = np.searchsorted(starts, passed, side="right")
    assert np.bincount(win).max() <= 8
    assert len(passed) == 8 * len(starts)
    assert pol.rate_limited == 300 - len(passed) and pol.nr_cand == 300


def test_rate_limit_end_to_end():
    sim = tierlab.api.simulation(machine="optane-2tier",
                                 workload="gups:hotset,updates=4e9",
                                 policy="autonuma-tiering,rate_limit_mbps=32",
                                 alloc="dram-preferred", scale=SCALE)
    rec = sim.run()
    check_invariants(sim)
    limit = sim.policy.rate_limit  # 32 pages per 1 s window
    assert limit == 32
    assert 0 < rec["promotions"] <= limit * (rec["sim_seconds"] + 1)


def test_threshold_auto_tuning_steps():
    sim = started("autonuma-tiering")
    pol = sim.policy
    ref = pol.rate_limit * 60
    pol.nr_cand = 10  # far fewer candidates than the limit allows: raise by 2/16
    pol._adjust_threshold(30.0)  # not yet 60 s
    assert pol.threshold() == pytest.approx(1.0)
    pol._adjust_threshold(60.5)
    assert pol.threshold() == pytest.approx(1.125)
    pol.nr_cand += int(1.2 * ref)  # too many: lower by a unit
    pol._adjust_threshold(121.0)
    assert pol.threshold() == pytest.approx(1.0)
    for k in range(20):  # bounded by 2 x hot_threshold
        pol._adjust_threshold(200.0 + 61 * k)
    assert pol.threshold() == pytest.approx(2.0)


def test_failed_promotion_wakes_kswapd_to_the_promo_watermark():
    sim = started("autonuma-tiering")  # dram-preferred: DRAM at its low watermark
    pol = sim.policy
    mem = sim.mem
    assert mem.free[0] < mem.wmark_high[0]  # no room: promotions fail
    pages = np.flatnonzero(mem.node == 1)[:50]
    advance(sim, 1.0)
    times = np.linspace(0.5, 1.0, 50)
    moved, failed = pol.kswapd.serve(pages, times, 1.0, "promote")
    # the first fault fails and wakes kswapd, which frees pages at its copy rate while
    # the later faults arrive (1.5 GB/s x scale: ~1430 pages/s here)
    assert pol.kswapd.wakeups == 1 and failed >= 1 and moved == 49
    landed(sim)
    assert sim.node_of(pages[0]) == 1 and np.all(sim.node_of(pages[1:]) == 0)
    assert pol.kswapd.freed >= 49
    # kswapd aims at WMARK_PROMO = high + (high - low), within its throughput
    assert promo_wmark(sim, 0) == 2 * mem.wmark_high[0] - mem.wmark_low[0]
    assert mem.free[0] <= promo_wmark(sim, 0) + 1
    check_invariants(sim)


def test_toptier_choice():
    m = tierlab.api.make_machine("optane-4tier")
    assert cpu_node(m) == 0
    assert toptier_nodes(m, "cpu") == [0]
    assert toptier_nodes(m, "dram") == [0, 1]
    sim = started("autonuma-tiering,toptier=dram", machine="optane-4tier")
    assert sim.policy.scanner.skip_nodes == [0, 1]
    with pytest.raises(tierlab.errors.TierlabError):
        AutoNumaTiering(toptier="socket")


# -----------------------------------------------------------------------------------
# MGLRU
# -----------------------------------------------------------------------------------
def test_mglru_evicts_the_oldest_generation():
    sim = started("autonuma-tiering-mglru", workload="gups:hotset,hot_start=start")
    pol = sim.policy
    on0 = np.flatnonzero(sim.mem.node == 0)
    assert np.all(pol.gen[on0] == pol.stamp(0, pol.max_seq[0]))  # faulted in: youngest
    advance(sim, 2.0)
    old = on0[on0 % 4 != 0]
    pol.min_seq[0] = pol.max_seq[0] - 2  # three generations
    pol.gen[old] = pol.stamp(0, pol.min_seq[0])
    pol.slots.move(old, pol.max_seq[0] & 3, pol.min_seq[0] & 3)
    pol.recount(0)  # 3/4 of the pages oldest, 1/4 youngest: no aging is due
    assert not pol.should_run_aging(0)
    pol.last_walk[0] = sim.now  # nothing accessed since: no second chance
    v = pol.select_victims(0, 500)
    assert len(v) == 500 and np.all(np.isin(v, old))
    # accessed pages of the oldest generation go to the youngest instead
    pol.last_walk[0] = 0.0
    hot = old[old < sim.workload.hot_pages]  # the hot set is first, in DRAM
    assert len(hot)
    oldest = pol.stamp(0, pol.min_seq[0])
    v = pol.select_victims(0, 200)
    assert len(v) == 200 and not np.isin(v, hot).any()
    assert (pol.gen[hot] != oldest).mean() > 0.5  # examined hot pages were moved up


def test_pte_slots_walked_are_the_present_tables_slots():
    """change_pte_range walks every slot of a present PTE table, holes included; a
    512-page block with no allocated page has no table (change_pmd_range skips it)."""
    alloc = np.zeros(3 * 512, bool)
    alloc[[300, 1100]] = True  # blocks 0 and 2 have a table, block 1 none
    assert hint_faults.pte_slots_walked(alloc, 0) == 1024
    # a range starting mid-block counts that block's slots in the range only
    assert hint_faults.pte_slots_walked(alloc[256:], 256) == 256 + 512
    assert hint_faults.pte_slots_walked(np.zeros(0, bool), 0) == 0


def test_mglru_should_run_aging_rules():
    """should_run_aging (mm/vmscan.c): MIN_NR_GENS generations left: age; one more: age
    when the youngest holds over 1/2 of the pages or the oldest under 1/4; more: never."""
    sim = started("autonuma-tiering-mglru")
    pol = sim.policy
    mx = int(pol.max_seq[0])

    def state(gens, sizes):
        pol.min_seq[0] = mx - gens + 1
        pol.nr_pages[0] = 0
        for k, n in enumerate(sizes):  # oldest first
            pol.nr_pages[0, (mx - gens + 1 + k) & 3] = n
        return pol.should_run_aging(0)

    assert state(2, [50, 50])
    assert not state(3, [30, 30, 40])          # within the range
    assert state(3, [30, 19, 51])              # youngest over half
    assert state(3, [24, 50, 26])              # oldest under a quarter
    assert not state(3, [25, 25, 50])          # the bounds themselves do not age
    assert not state(4, [1, 1, 1, 97])


def test_mglru_arrivals_join_by_their_old_generation():
    """A migrated page joins its new node's max_seq when its generation on the old node
    was active (max_seq or max_seq - 1: lru_gen_del_folio keeps PG_active when not
    reclaiming), else max_seq - 1 (inactive anon); reclaim's victims, isolated with no
    generation, arrive inactive. `nr_pages` follows every move."""
    sim = started("autonuma-tiering-mglru", workload="gups:hotset,hot_start=start")
    pol = sim.policy
    on0 = np.flatnonzero(sim.mem.node == 0)
    young, older, victims = on0[:10], on0[10:20], on0[20:30]
    pol.min_seq[0] = pol.max_seq[0] - 3
    pol.gen[older] = pol.stamp(0, pol.min_seq[0])
    pol.slots.move(older, pol.max_seq[0] & 3, pol.min_seq[0] & 3)
    pol.gen[victims] = 0
    pol.slots.move(victims, pol.max_seq[0] & 3, None)
    for n in range(sim.machine.nnodes):
        pol.recount(n)
    before = pol.nr_pages.copy()
    mx1 = int(pol.max_seq[1])
    assert sim.migrate(np.concatenate((young, older, victims)), 1) == 30
    assert np.all(pol.gen[young] == pol.stamp(1, mx1))
    assert np.all(pol.gen[older] == pol.stamp(1, mx1 - 1))
    assert np.all(pol.gen[victims] == pol.stamp(1, mx1 - 1))
    assert pol.nr_pages[1, mx1 & 3] - before[1, mx1 & 3] == 10
    assert pol.nr_pages[1, (mx1 - 1) & 3] - before[1, (mx1 - 1) & 3] == 20
    assert before[0].sum() - pol.nr_pages[0].sum() == 20  # the victims had no generation
    assert slots_mirror_gen(pol)


def test_mglru_generation_sizes_follow_a_run():
    """`nr_pages` (lrugen->nr_pages) kept through allocation, aging, eviction, promotion
    and demotion equals a count of the generation bytes at the end of a run."""
    sim = tierlab.api.simulation(machine="optane-2tier", workload="gups:dynamic,updates=1.2e9",
                                 policy="autonuma-tiering-mglru", seed=0, scale=SCALE)
    rec = sim.run()
    pol = sim.policy
    assert rec["promotions"] > 0 and rec["demotions"] > 0 and pol.agings > 0
    g = pol.gen.astype(np.int64)
    k = sim.machine.nnodes
    want = np.bincount(g, minlength=4 * (k + 1))[4:].reshape(k, 4)
    np.testing.assert_array_equal(pol.nr_pages, want)


def test_mglru_ages_when_two_generations_are_left():
    sim = started("autonuma-tiering-mglru")
    pol = sim.policy
    advance(sim, 1.0)
    pol.min_seq[0] = pol.max_seq[0] - (MIN_NR_GENS - 1)
    seq = int(pol.max_seq[0])
    pol.select_victims(0, 10)
    assert pol.agings >= 1 and pol.max_seq[0] >= seq + 1
    assert pol.nr_gens(0) <= 4
    assert pol.walker.stats()["pte_walks"] >= 1 and pol.walker.cpu_seconds > 0


def slots_mirror_gen(pol):
    """Whether the generations' slot bitmaps hold exactly seq % 4 of every page that
    has a generation, and nothing for the others."""
    g = pol.gen.astype(np.int64)
    return np.array_equal(pol.slots.slot_of()[:g.shape[0]], np.where(g != 0, g & 3, -1))


@pytest.mark.parametrize("block", [1024, 7])
def test_mglru_aging_in_one_pass_is_the_walk_then_the_update(block, monkeypatch):
    """MGLRU's aging through `PteScan.age_node`'s one compiled pass (`pte_scan.mglru_age`:
    the node's pages from its bitmap row, their accessed bits drawn by blocks, each
    generation byte and slot bit updated as it goes) leaves the same run as
    `walk_node` then the numpy update: the same record, generations, slot bitmaps,
    sequence numbers, walk counts and charges, pass maps and stream after, on four
    tiers (agings of three nodes, arrivals from the others) across a field change,
    growth and frees. Blocks of 7 pages end mid-word."""

    def state(sim, rec):
        pol, w = sim.policy, sim.policy.walker
        assert slots_mirror_gen(pol)
        return (rec, pol.gen.copy(), pol.slots.rows.copy(), pol.min_seq.copy(),
                pol.max_seq.copy(), pol.hand.copy(),
                np.array([w.walks, w.pages_scanned, w.checks, w.cpu_seconds]),
                {k: np.concatenate((m.bounds, m.times)) for k, m in w._maps.items()
                 if k is not None}, w.rng.random(4))

    runs, fused = fused_and_apart(monkeypatch, PteScan, "age_node", lambda *a, **k: False,
                                  "autonuma-tiering-mglru", block, 1e9, state)
    assert fused > 10 and runs[0][6][1] > 0
    assert_same_runs(*runs)


def test_mglru_aging_folds_the_oldest_generation_in_one_pass(monkeypatch):
    """With four generations an aging first folds the oldest into the next
    (inc_min_seq); the one pass and the numpy update agree on it, page by page (the
    policy's own eviction ages only at two generations, so runs never fold)."""
    if not jit.numba_jit():
        pytest.skip("the one pass needs numba")
    got = []
    for fused in (True, False):
        if not fused:
            monkeypatch.setattr(PteScan, "age_node", lambda *a, **k: False)
        sim = started("autonuma-tiering-mglru", workload="gups:hotset,hot_start=start")
        pol = sim.policy
        advance(sim, 1.0)
        pol.age(0)  # a walk now: few pages are accessed by the next
        advance(sim, 1.001)
        on0 = np.flatnonzero(sim.mem.node == 0)
        mx = int(pol.max_seq[0])
        for k in range(4):
            pol.slots.move(on0[pol.gen[on0] & 3 == k], k, None)
        pol.gen[on0] = pol.stamp(0, mx)
        pol.slots.move(on0, None, mx & 3)
        pol.min_seq[0] = mx - 3  # four generations
        for k, part in enumerate(np.array_split(on0, 4)):  # one quarter in each
            pol.gen[part] = pol.stamp(0, mx - 3 + k)
            pol.slots.move(part, mx & 3, (mx - 3 + k) & 3)
        oldest = on0[pol.gen[on0] == pol.stamp(0, mx - 3)]
        pol.age(0)
        assert pol.min_seq[0] == mx - 2 and pol.max_seq[0] == mx + 1
        # none is left in the folded generation; the idle ones of it are in the next
        assert not (pol.gen[on0] == pol.stamp(0, mx - 3)).any()
        assert (pol.gen[oldest] == pol.stamp(0, mx - 2)).any()
        assert slots_mirror_gen(pol)
        got.append((pol.gen.copy(), pol.slots.rows.copy(), pol.walker.rng.random(4)))
    for x, y in zip(*got):
        np.testing.assert_array_equal(x, y)


# -----------------------------------------------------------------------------------
# TPP
# -----------------------------------------------------------------------------------
def test_tpp_promotes_only_active_pages():
    sim = started("tpp", alloc="pm-preferred")  # DRAM empty: room for promotions
    pol = sim.policy
    pages = np.flatnonzero(sim.mem.node == 1)[:200]
    t = np.zeros(200)
    assert not sim.lru.is_active(pages).any()
    pol.on_faults(pages, t, t, 0.0)  # inactive: mark_page_accessed, no promotion
    assert np.all(sim.node_of(pages) == 1) and not sim.lru.is_active(pages).any()
    pol.on_faults(pages, t, t, 0.0)  # referenced -> active, still no promotion
    assert np.all(sim.node_of(pages) == 1) and sim.lru.is_active(pages).all()
    pol.on_faults(pages, t, t, 0.0)  # active: promoted to the CPU node
    assert np.all(landed(sim).node_of(pages) == 0)
    assert pol.promoted == 200 and pol.marked == 400
    check_invariants(sim)


def test_tpp_kswapd_keeps_the_demotion_watermark_free_and_arms_demoted():
    sim = started("tpp")  # dram-preferred: DRAM at its low watermark
    pol = sim.policy
    mem = sim.mem
    wm = pol.demote_wmark[0]
    assert wm == max(mem.capacity[0] * 200 // 10000, 2 * mem.wmark_high[0])
    advance(sim, 1.0)
    e = np.zeros(0, dtype=np.int64)
    pol.on_faults(e, np.zeros(0), np.zeros(0), 1.0)  # kswapd woke, freed at its rate
    freed1 = pol.kswapd.freed
    assert freed1 > 0 and pol.demoted_armed == freed1
    for k in range(2, 40):
        advance(sim, float(k))
        pol.on_faults(e, np.zeros(0), np.zeros(0), float(k))
    assert mem.free[0] >= wm  # balanced at the demotion watermark
    assert pol.scanner.hf.armed == pol.demoted_armed  # demoted pages fault next touch
    check_invariants(sim)


def test_tpp_four_tiers_promotes_from_every_lower_node():
    sim = tierlab.api.simulation(machine="optane-4tier", workload="gups:hotset,updates=4e9",
                                 policy="tpp", alloc="pm-preferred", scale=SCALE)
    rec = sim.run()
    check_invariants(sim)
    assert rec["promotions"] > 0
    assert sim.policy.scanner.skip_nodes == [0]


# -----------------------------------------------------------------------------------
# pte-scan
# -----------------------------------------------------------------------------------
def test_pte_scan_walks_and_periodic_bitmap():
    sim = started("static", alloc="dram-preferred")
    ps = PteScan(period="1s", step="250ms")
    ps.attach(sim)
    advance(sim, 0.5)
    pages, young = ps.walk_node(1, sim.now)
    assert np.all(sim.mem.node[pages] == 1) and young.any()
    hot0 = sim.mem.npages - sim.workload.hot_pages
    assert young[pages >= hot0].mean() > young[pages < hot0].mean()
    c0 = ps.checks
    pages2, young2 = ps.walk_node(1, sim.now)  # just walked: nothing new
    assert not young2.any()
    # non-leaf PMD bits: a walk finding nothing checks only the PMD entries
    assert ps.checks - c0 == math.ceil(sim.mem.npages / 512)
    for k in range(4):
        advance(sim, 0.5 + 0.25 * (k + 1))
        ps._tick(sim.now)
    assert ps.passes == 1
    assert ps.young(np.arange(hot0, sim.mem.npages)).mean() > 0.9


# -----------------------------------------------------------------------------------
# End to end
# -----------------------------------------------------------------------------------
@pytest.mark.parametrize("machine", ["optane-2tier", "optane-4tier"])
@pytest.mark.parametrize("alloc", ["dram-preferred", "pm-preferred"])
def test_tiering_baselines_beat_static_not_oracle(machine, alloc):
    wl = "gups:hotset,updates=8e9"
    thr = {}
    for p in ["static", "oracle"] + TIERING:
        sim = tierlab.api.simulation(machine=machine, workload=wl, policy=p, alloc=alloc,
                                     scale=SCALE)
        rec = sim.run()
        check_invariants(sim)
        thr[p] = rec["throughput"]
        if p in TIERING:
            assert rec["promotions"] > 0 and rec["monitor_cpu_seconds"] > 0
    for p in TIERING:
        assert thr["static"] < thr[p] <= thr["oracle"] * (1 + 5e-3), (p, thr)


@pytest.mark.parametrize("policy", ["autonuma"] + TIERING)
def test_same_seed_same_record(policy):
    recs = [tierlab.run(machine="optane-2tier", workload="gups:hotset,updates=1e9",
                        policy=policy, alloc="pm-preferred", scale=SCALE, seed=3)
            for _ in range(2)]
    for r in recs:
        r.pop("wall_seconds")
    assert recs[0] == recs[1]


@pytest.mark.parametrize("policy", ["autonuma", "autonuma-tiering-mglru", "tpp"])
def test_survives_moves_growth_and_frees(policy, hotcold):
    from test_engine import small_machine
    m = small_machine(dram_pages=900, slow_pages=3000, tiers=4)
    wl = hotcold(n=3000, hot=300, phases=3, grow=400, free_first=200, work=2e8)
    sim = Simulation(m, wl, tierlab.api.make_policy(policy),
                     tierlab.api.make_alloc("dram-preferred"), seed=1)
    sim.run()
    check_invariants(sim)
    assert sim.mem.allocated == 3000 + 400 - 200
    hf = sim.policy.scanner.hf
    assert not hf.is_armed(np.arange(200)).any()  # freed pages were disarmed


def _thread_reference(t, lat, fault_s, copy_s, threads, th, room0, t_a, rate, wake):
    """What a thread taking faults one after another does (the rules of
    `Kswapd.fault_thread`, one fault at a time, no tuning, no rate limit)."""
    from tierlab.policies.autonuma import NO_ROOM, PROMOTED, TOO_COLD
    out, end, taken = [], -np.inf, 0
    for tj, lj in zip(t, lat):
        h = max(tj, end)
        cost = fault_s
        if lj + (h - tj) >= th:
            out.append(TOO_COLD)
        else:
            supply = room0 + (np.floor(rate * (h - t_a)) if t_a is not None and h > t_a
                              else 0)
            if taken < supply:
                out.append(PROMOTED)
                taken += 1
                cost += copy_s
            else:
                out.append(NO_ROOM)
                if t_a is None and wake:
                    t_a = h
        end = h + cost / threads
    return np.array(out), t_a


@pytest.mark.parametrize("seed", range(4))
def test_hint_faults_are_taken_one_after_another_per_thread(seed):
    """docs/sim-vs-kernel: a thread takes its faults in turn (the fault, and for a
    promotion the copy, in its context), so a burst of faults is spread by what its
    promotions cost: a fault's hint-fault latency is read when it is taken, and kswapd
    frees room meanwhile. The compiled thread agrees with a fault-by-fault reference on
    random bursts, whatever room and kswapd state it starts from."""
    from tierlab.policies.autonuma import NO_ROOM, PROMOTED, TOO_COLD
    rng = np.random.default_rng(seed)
    sim = started("autonuma-tiering,adjust=0")
    pol, ks, m = sim.policy, sim.policy.kswapd, sim.machine
    pol.rate_limit = 1 << 40
    n = 400
    t = np.sort(rng.uniform(1.0, 1.0 + rng.choice([1e-4, 0.05, 2.0]), n))
    lat = rng.uniform(0.0, 1.2, n)
    node = ks.node
    free = int(sim.mem.wmark_high[node]) + 1 + int(rng.integers(0, 60))
    sim.mem.held[node] += int(sim.mem.free[node]) - free
    ks.awake = bool(rng.integers(0, 2))
    ks.since = 0.9
    ks.rate = float(rng.choice([2e3, 5e4]))
    out, poll = ks.fault_thread(t, lat, pol, 0, True)
    want, t_a = _thread_reference(t, lat, m.hint_fault_s, PAGE * sim.scale / m.migrate_bw,
                                  float(sim.threads), pol.threshold(),
                                  free - int(sim.mem.wmark_high[node]) - 1,
                                  0.9 if ks.awake else None, ks.rate, True)
    assert np.array_equal(out, want)
    assert poll.t_a == t_a
    assert pol.too_cold == int((want == TOO_COLD).sum())
    assert pol.nr_cand == int(np.isin(want, [PROMOTED, NO_ROOM]).sum())


def test_a_burst_of_faults_outlasts_the_hot_threshold():
    """A burst of faults on pages armed together: the thread promotes while it takes
    them within the threshold of their scan and then finds the rest too cold, however
    soon after the scan the workload touched them (kernel-hotcold's first pass: 12,036
    candidates of 32,768 faults in the guest, docs/sim-vs-kernel)."""
    from tierlab.policies.autonuma import PROMOTED, TOO_COLD
    sim = started("autonuma-tiering,adjust=0", alloc="pm-preferred")  # room for all
    pol, m = sim.policy, sim.machine
    each = (m.hint_fault_s + PAGE * sim.scale / m.migrate_bw) / sim.threads
    pol.hot_threshold = 10.5 * each
    out, _ = pol.kswapd.fault_thread(np.full(40, 2.0), np.zeros(40), pol, 0, True)
    assert np.all(out[:11] == PROMOTED) and np.all(out[11:] == TOO_COLD)
    # the copy the thread waits for is the stall the engine charges for it (the copy at
    # the unscaled per-thread bandwidth, then one TLB shootdown per batch)
    before = sim.stats.app_stall_seconds
    assert sim.migrate(np.flatnonzero(sim.mem.node == 1)[:1], 0, sync=True) == 1
    shootdown = m.tlb_shootdown_s / (sim.costs.batch_pages * sim.scale)
    assert sim.stats.app_stall_seconds - before - shootdown == pytest.approx(
        PAGE * sim.scale / m.migrate_bw / sim.threads)
