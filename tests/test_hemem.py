"""Issue 6, items 1, 2 and 7 (HeMem): the `pebs` monitor and the `hemem` policy.

Crafted states check HeMem's rules (lazy halving by the global clock, clock ticks past
the cooling threshold, cold <-> hot list moves, the cooling cursor); small runs check
the engine's invariants, that PEBS counts follow the access rates, that a shared
sampling core costs the application, and the paper's GUPS result at 1/64 scale.
"""
from __future__ import annotations

import numpy as np
import pytest

import tierlab
from tierlab.engine import Simulation
from tierlab.errors import TierlabError
from tierlab.field import RateField
from tierlab.monitors import MONITORS
from tierlab.monitors.pebs import PebsBatch
from tierlab.policies import ALLOCS, POLICIES
from tierlab.policies.hemem import DRAM, HP, NVM, halve, wp_stall
from tierlab.workloads.base import Change, Workload, ranges

from conftest import HotCold
from test_engine import check_invariants, small_machine

SCALE = 1 / 64


def attached(dram_hps=8, slow_hps=32, n_hps=16, **params):
    """A hemem policy after a short run on a small machine (state arrays live)."""
    m = small_machine(dram_pages=dram_hps * HP, slow_pages=slow_hps * HP)
    wl = HotCold(n=n_hps * HP, hot=HP, work=2e5)
    spec = "hemem" + "".join(f",{k}={v}" for k, v in params.items())
    pol = POLICIES.create(spec)
    sim = Simulation(m, wl, pol, ALLOCS.create("dram-preferred"), seed=0)
    sim.run()
    pol.hot[:] = False
    pol.need_cool = [False, False]
    pol.cursor = [None, None]
    return sim, pol


# -----------------------------------------------------------------------------------
# Cooling: lazy halving by the global clock
# -----------------------------------------------------------------------------------
def test_halve_rule():
    out = halve([40, 19, 1 << 40, 5, 7], [7, 9, 0, 0, 12], 12)
    assert out.tolist() == [40 >> 5, 19 >> 3, (1 << 40) >> 12, 0, 7]
    assert halve([5], [0], 10_000).tolist() == [0]  # far behind: cooled to nothing


def test_lazy_halving_on_touch_only():
    _, pol = attached()
    pol.clock = 10
    h = np.array([0, 1, 2])
    pol.reads[h] = 40
    pol.writes[h] = 9
    pol.clk[h] = [7, 10, 0]
    pol.touch([0], [0], [0])
    assert (pol.reads[0], pol.writes[0], pol.clk[0]) == (5, 1, 10)
    assert pol.reads[2] == 40 and pol.clk[2] == 0  # untouched: still pending
    pol.touch([1, 2], [1, 0], [0, 1])
    assert (pol.reads[1], pol.writes[1]) == (41, 9)  # clock already seen: no halving
    assert (pol.reads[2], pol.writes[2]) == (0, 1)  # 10 halvings, then the sample
    assert pol.clock == 11  # the read left page 1 at 41 > 18: one tick


def test_cooling_threshold_ticks_the_clock():
    _, pol = attached(cooling=18)
    c0, t0 = pol.clock, pol.ticks
    pol.writes[3], pol.reads[3], pol.clk[3] = 18, 0, c0
    pol.touch([3], [0], [1])  # 19 > 18: the global clock ticks
    assert pol.writes[3] == 19 and pol.clock == c0 + 1 and pol.ticks == t0 + 1
    assert pol.need_cool == [True, True]
    pol.touch([3], [0], [1])  # next touch: halved first, then counted
    assert pol.writes[3] == 19 // 2 + 1 and pol.clock == c0 + 1


def test_samples_of_one_poll_apply_in_order():
    """Three stores on a page at 17: 18, 19 (tick), then 19 >> 1 + 1 = 10."""
    _, pol = attached()
    c0 = pol.clock
    pol.writes[3], pol.reads[3], pol.clk[3] = 17, 0, c0
    pages = np.full(3, 3 * HP + 5, dtype=np.int64)
    z = np.zeros(0, dtype=np.int64)
    batch = PebsBatch(0.0, 0.01, z, z, z, z, pages, np.array([0.001, 0.002, 0.003]),
                      np.full(3, 2, dtype=np.int8))
    pol._on_samples(batch, 0.01)
    assert pol.writes[3] == 10 and pol.clock == c0 + 1


# -----------------------------------------------------------------------------------
# Hot and cold lists
# -----------------------------------------------------------------------------------
def test_threshold_moves_cold_to_hot_and_cooling_moves_back():
    _, pol = attached(hot_reads=8, hot_writes=4)
    for h in (0, 1):
        assert pol.tier[h] == DRAM
        pol.reads[h] = pol.writes[h] = 0
        pol.clk[h] = pol.clock
    pol.touch([0, 1], [0, 7], [3, 0])
    assert not pol.hot[0] and not pol.hot[1]  # 3 writes, 7 reads: still cold
    before = int(pol.seq.max())
    pol.touch([0], [0], [1])  # 4 writes: hot, at the tail of the DRAM hot list
    assert pol.hot[0] and pol.seq[0] == before + 1
    pol.touch([1], [1], [0])  # 8 reads: hot
    assert pol.hot[1] and pol.seq[1] == before + 2
    pol._tick_clock(1)
    assert pol.cool(DRAM) == 2  # 4 >> 1 = 2 writes, 8 >> 1 = 4 reads: both cooled
    assert not pol.hot[0] and not pol.hot[1]
    assert pol.seq[[0, 1]].min() > before + 2  # tail of the DRAM cold list
    assert pol.need_cool[DRAM] is False and pol.cursor[DRAM] is None


def test_cooling_cursor_walks_from_the_tail_in_rounds():
    _, pol = attached(cool_pages=2)
    hps = np.arange(5)
    assert np.all(pol.tier[hps] == DRAM)
    pol.reads[hps] = 0
    pol.writes[hps] = 0
    pol.clk[hps] = pol.clock
    for h in hps:
        pol.touch([h], [0], [4])  # hot, enqueued in order 0..4
    assert pol.hot[hps].all()
    pol._tick_clock(3)  # 4 >> 3 = 0: all will cool when walked
    assert pol.cool(DRAM) == 2 and pol.hot[:3].all() and not pol.hot[3:5].any()
    assert pol.need_cool[DRAM]
    assert pol.cool(DRAM) == 2 and pol.hot[0] and not pol.hot[1:5].any()
    assert pol.cool(DRAM) == 1 and not pol.hot[hps].any()
    assert not pol.need_cool[DRAM]
    assert pol.writes[0] == 4 >> 3


def test_policy_round_promotes_write_heavy_first_and_evicts_oldest_cold():
    sim, pol = attached(dram_hps=8, slow_hps=32, n_hps=16)
    dram = np.flatnonzero(pol.tier == DRAM)
    nvm = np.flatnonzero(pol.tier == NVM)
    assert dram.size >= 4 and nvm.size >= 4
    pol._busy_until = 0.0
    pol.budget_pages = 2 * (2 * HP)  # two swaps
    # all DRAM pages cold, in address order (oldest first); two NVM pages hot
    pol._enqueue(dram)
    pol.reads[:] = 0
    pol.writes[:] = 0
    pol.clk[:] = pol.clock
    r_hot, w_hot, third = nvm[-1], nvm[-2], nvm[-3]
    pol.touch([r_hot], [8], [0])
    pol.touch([w_hot], [0], [4])
    pol.touch([third], [0], [5])
    pol._migrate(sim.now)
    on_top = lambda h: np.all(sim.mem.node[h * HP:(h + 1) * HP] == 0)  # noqa: E731
    assert on_top(w_hot) and on_top(third) and not on_top(r_hot)  # writers first, budget
    assert pol.tier[dram[0]] == NVM and pol.tier[dram[1]] == NVM  # oldest cold evicted
    assert pol.tier[w_hot] == DRAM and pol.hot[w_hot]
    assert pol._busy_until > sim.now
    check_invariants(sim)


def test_wp_stall_limits():
    t = 1e-3
    assert wp_stall([10.0], [t], 16)[0] == pytest.approx(10.0 * t * t / 2, rel=1e-3)
    assert wp_stall([1e9], [t], 16)[0] == pytest.approx(16 * t, rel=1e-3)
    assert wp_stall([0.0], [t], 16)[0] == 0.0


# -----------------------------------------------------------------------------------
# Runs
# -----------------------------------------------------------------------------------
@pytest.mark.parametrize("tiers,alloc", [(2, "dram-preferred"), (4, "dram-always"),
                                         (2, "pm-always")])
def test_invariants_small_run(tiers, alloc):
    m = small_machine(dram_pages=6 * HP, slow_pages=24 * HP, tiers=tiers)
    wl = HotCold(n=16 * HP, hot=2 * HP, phases=3, grow=HP, free_first=HP // 2, work=2e9)
    pol = POLICIES.create("hemem")
    sim = Simulation(m, wl, pol, ALLOCS.create(alloc), seed=2)
    rec = sim.run()
    check_invariants(sim)
    assert sim.mem.allocated == 16 * HP + HP - HP // 2
    assert rec["promotions"] > 0 and rec["policy_stats"]["promoted_2m"] > 0
    st = rec["policy_stats"]
    assert st["hot_dram_2m"] + st["hot_nvm_2m"] <= int(np.count_nonzero(pol.tier != 2))


class Levels(Workload):
    """Three 1024-page segments with access rates 16 : 4 : 1 (reads = writes)."""

    LEVELS = (16.0, 4.0, 1.0)

    def __init__(self, seg=1024, work=2e8):
        n = 3 * seg
        super().__init__(name="levels", npages=n, footprint_pages=n, total_work=work,
                         work_unit="updates", compute_ns=10.0, threads=8, mlp=4.0)
        self.seg = seg
        lv = np.asarray(self.LEVELS)
        self.rate = lv / (seg * lv.sum())  # per page: 1 read + 1 write per update

    def changes(self):
        s = self.seg
        f = RateField.from_segments([0, s, 2 * s], [s, 2 * s, 3 * s], self.rate, self.rate,
                                    self.npages)
        yield Change(0, field=f, alloc=ranges((0, self.npages)))


def test_pebs_counts_proportional_to_rates():
    wl = Levels()
    m = small_machine(dram_pages=1600, slow_pages=4096)
    sim = Simulation(m, wl, POLICIES.create("static"), ALLOCS.create("dram-preferred"),
                     seed=3)
    mon = MONITORS.create("pebs,period=1001,poll=10ms")
    mon.attach(sim)
    n = wl.npages
    tot = {k: np.zeros(n, dtype=np.int64) for k in ("fast", "slow", "store")}

    def collect(batch, now):
        for k in tot:
            np.add.at(tot[k], batch.pages, getattr(batch, k))

    mon.subscribe(collect)
    rec = sim.run()
    assert rec["policy"] == "static" and sim.work == pytest.approx(wl.total_work)
    node = sim.mem.node
    assert tot["fast"][node != 0].sum() == 0 and tot["slow"][node == 0].sum() == 0
    reads = tot["fast"] + tot["slow"]
    expect = np.repeat(wl.rate, wl.seg) * wl.total_work / 1001  # per page, reads = writes
    assert expect.min() > 5
    for obs in (reads, tot["store"]):
        for s in range(3):
            sl = slice(s * wl.seg, (s + 1) * wl.seg)
            e = expect[sl].sum()
            assert abs(obs[sl].sum() - e) < 4 * np.sqrt(e), (s, obs[sl].sum(), e)
        chi2 = float(((obs - expect) ** 2 / expect).sum())  # per page: Poisson(expect)
        assert abs(chi2 - n) < 5 * np.sqrt(2 * n), chi2
    assert mon.stats()["samples"]["store"] == tot["store"].sum()
    assert rec["monitor_cpu_seconds"] == pytest.approx(mon.cpu_seconds)


def test_shared_core_slows_the_application():
    recs = {core: tierlab.run(machine="optane-2tier",
                              workload="gups:hotset,hot_start=start,updates=1e10",
                              policy=f"hemem:core={core},period=1001", scale=SCALE, seed=0)
            for core in ("shared", "dedicated")}
    sh, de = recs["shared"], recs["dedicated"]
    pebs_cpu = de["policy_stats"]["monitor"]["cpu_seconds"]
    assert pebs_cpu > 0 and de["monitor_cpu_seconds"] >= pebs_cpu
    assert sh["monitor_cpu_seconds"] == 0.0
    threads = 16 * SCALE
    extra = sh["app_stall_seconds"] - de["app_stall_seconds"]
    assert extra == pytest.approx(pebs_cpu / threads, rel=0.15)
    assert sh["throughput"] < de["throughput"] * 0.995


@pytest.mark.parametrize("scale", [1 / 64, 1 / 256])
def test_a_spinning_sampler_on_the_applications_cores_costs_one_thread(scale):
    """HeMem's PEBS thread spins (busy=on): sharing the application's cores takes one of
    16 threads' time at any --scale, not just its samples' cost."""
    run = {busy: tierlab.run(machine="optane-2tier", workload="gups:hotset,hot=1GiB",
                             policy=f"hemem:core=shared,busy={busy}", scale=scale, seed=0)
           for busy in ("on", "off")}
    on, off = run["on"], run["off"]
    assert on["policy_stats"]["monitor"]["busy"] is True
    assert on["throughput"] / off["throughput"] == pytest.approx(1 - 1 / 16, abs=0.01)


def test_gups_hot_set_fits_dram_near_oracle():
    """HeMem's Figure: with the hot set within DRAM, GUPS runs close to the bound."""
    sim = tierlab.api.simulation("optane-2tier", "gups:hotset", "hemem", scale=SCALE,
                                 seed=0)
    rec = sim.run()
    wl = sim.workload
    hot = sim.mem.node[wl.hot_start:wl.hot_start + wl.hot_pages]
    assert np.mean(hot == 0) > 0.9
    orc = tierlab.run(machine="optane-2tier", workload="gups:hotset", policy="oracle",
                      scale=SCALE, seed=0)
    assert rec["throughput"] >= 0.85 * orc["throughput"]
    st = rec["policy_stats"]
    assert st["monitor"]["samples"]["store"] > 0 and st["promoted_2m"] > 0


def test_gups_hot_set_larger_than_dram_no_collapse():
    wl = "gups:hotset,hot=48GiB"
    he = tierlab.run(machine="optane-2tier", workload=wl, policy="hemem", scale=SCALE,
                     seed=0)
    st = tierlab.run(machine="optane-2tier", workload=wl, policy="static", scale=SCALE,
                     seed=0)
    assert he["throughput"] >= st["throughput"]
    assert he["policy_stats"]["blocked_rounds"] > 0  # DRAM all hot: rounds stop


# -----------------------------------------------------------------------------------
# Parameters
# -----------------------------------------------------------------------------------
@pytest.mark.parametrize("spec,needle", [
    ("hemem:copy=gpu", "threads, dma"),
    ("hemem:core=other", "dedicated, shared"),
    ("hemem:period=fast", "10007"),
    ("hemem:hot_writes=0", "hot_writes"),
    ("hemem:budget=lots", "budget"),
])
def test_bad_policy_values(spec, needle):
    with pytest.raises(TierlabError, match=needle):
        POLICIES.create(spec)


@pytest.mark.parametrize("spec,needle", [
    ("pebs,events=loads", "fast_load, slow_load, store"),
    ("pebs,core=gpu", "dedicated, shared"),
    ("pebs,period=1+2", "fast_load\\+slow_load\\+store"),
])
def test_bad_monitor_values(spec, needle):
    with pytest.raises(TierlabError, match=needle):
        MONITORS.create(spec)


def test_monitor_options():
    mon = MONITORS.create("pebs,events=store+fast_load,period=5003+10007+19997")
    assert mon.events == ("fast_load", "store")
    assert mon.period == {"fast_load": 5003, "slow_load": 10007, "store": 19997}
    assert MONITORS.create("pebs").period["store"] == 10007
