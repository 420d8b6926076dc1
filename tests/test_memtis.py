"""Issue 17, items 4 and 7 (MEMTIS, SOSP'23): the `memtis` policy.

Crafted states check MEMTIS's rules (bins, the hot threshold sized to the fast tier and
only rising between coolings, the CPU-quota period steps, the skew ranking that splits a
skewed huge page and not a uniform one); small runs check the engine's invariants, that
a hot set that fits is promoted and kept in the fast tier, and determinism.
"""
from __future__ import annotations

import numpy as np
import pytest

from tierlab.engine import Simulation
from tierlab.errors import TierlabError
from tierlab.field import RateField
from tierlab.policies import ALLOCS, POLICIES
from tierlab.policies.hemem import HP
from tierlab.policies.memtis import (LOAD_PERIODS, STORE_PERIODS, cooled_bins, get_idx,
                                     get_skew_idx)
from tierlab.workloads.base import Change, Workload, ranges

from conftest import HotCold
from test_engine import check_invariants, small_machine

SCALE = 1 / 64  # watermark clamps (100 MiB ...) are full-scale figures


def run_small(spec="memtis", tiers=2, seed=0, work=2e7, alloc="dram-preferred",
              dram_hps=8, slow_hps=32, n_hps=16, hot_hps=2, probe=None, **wl):
    m = small_machine(dram_pages=dram_hps * HP, slow_pages=slow_hps * HP, tiers=tiers)
    w = HotCold(n=n_hps * HP, hot=hot_hps * HP, work=work, **wl)
    pol = POLICIES.create(spec)
    sim = Simulation(m, w, pol, ALLOCS.create(alloc), seed=seed, scale=SCALE)
    if probe is not None:
        sim.every(0.25, lambda now: probe(sim, now))
    rec = sim.run()
    return sim, pol, rec


#: the hot range's share on the fast node over time in the `small` run
ON_TOP: list = []


@pytest.fixture(scope="module")
def small():
    def probe(sim, now):
        wl = sim.workload
        ON_TOP.append(float(np.mean(sim.mem.node[wl.n - wl.hot:wl.n] == 0)))
    ON_TOP.clear()
    return run_small(probe=probe)


# -----------------------------------------------------------------------------------
# Bins (htmm_core.c get_idx, get_skew_idx)
# -----------------------------------------------------------------------------------
def test_bins():
    assert get_idx([0, 1, 2, 3, 511, 512, 1023, 32766, 32767, 10 ** 9]).tolist() == \
        [0, 1, 1, 2, 9, 9, 10, 14, 15, 15]
    assert get_skew_idx([0, 1, 3, 4, 1023, 1024, 1025, 2048, 2049, 10 ** 7]).tolist() == \
        [0, 1, 2, 3, 10, 11, 12, 12, 13, 20]


# -----------------------------------------------------------------------------------
# Hot threshold: the hot set fits the fast tier; it only rises between coolings
# -----------------------------------------------------------------------------------
def _units_hot_pages(pol, thres):
    ids, huge, b, cnt, on, off = pol._units()
    return int((on + off)[b >= thres].sum())


def test_hot_threshold_keeps_hot_set_within_fast_tier(small):
    sim, pol, _ = small
    room = pol.cap - pol.promo_wmark
    rng = np.random.default_rng(1)
    alive = np.flatnonzero(pol.alive & ~pol.split)
    assert alive.size * HP > room  # the footprint does not fit: the threshold must bite
    pol.meta[alive] = rng.integers(0, 1 << 14, alive.size)
    pol.hclk[alive] = pol.clock
    pol.cooled = pol.split_happen = False
    pol.active = 1
    pol._adjust_threshold()
    t = pol.active
    assert 1 < t <= 15
    assert _units_hot_pages(pol, t) <= room
    assert _units_hot_pages(pol, t - 1) > room  # the lowest bin that fits
    # between coolings it only rises: colder pages leave it where it is
    pol.meta[alive] >>= 4
    pol._adjust_threshold()
    assert pol.active == t
    # warm = hot - 1 while the pages the walk fitted fill < 75% of the room
    _, fitted = pol._walk(pol.histograms()[0], room)
    assert pol.warm_thres == (t - 1 if fitted < room * 3 // 4 else t)
    # at the first adaptation after a cooling it drops by one, not to the computed bin
    pol.need_cooling = False
    pol.split_enabled = False
    pol._cooling()
    pol._adjust_threshold()
    assert pol.active == t - 1
    # after splits it may fall between coolings too (the histogram changed)
    pol.split_enabled = pol.split_happen = True
    pol._adjust_threshold()
    assert pol.active < t - 1 and _units_hot_pages(pol, pol.active) <= room


def test_hot_set_that_fits_is_promoted_and_kept(small):
    sim, pol, rec = small
    check_invariants(sim)
    wl = sim.workload
    hot = sim.mem.node[wl.n - wl.hot:wl.n]
    assert np.mean(hot == 0) > 0.95  # first touch put it on the slow tier
    st = rec["policy_stats"]
    assert st["promoted_pages"] >= wl.hot * 0.9 and rec["promotions"] > 0
    assert st["hot_pages"] <= pol.cap  # hot set within the fast tier
    # first touch put the hot range on the slow tier; once promoted it stays. (The
    # second hot huge page waits a few seconds: the cold DRAM pages all sit in the warm
    # bin, hot - 1, which demotion spares, until a cooling spreads them; the kernel's
    # rules do the same.)
    assert ON_TOP[0] < 0.05
    got = next(i for i, f in enumerate(ON_TOP) if f > 0.95)
    assert got < len(ON_TOP) * 2 / 3 and min(ON_TOP[got:]) > 0.95
    # the fast tier keeps MEMTIS's demotion watermark free (kmigraterd, no kswapd)
    assert sim.mem.used[0] <= pol.cap - pol.demo_wmark + HP


@pytest.mark.parametrize("tiers,alloc", [(4, "dram-preferred"), (2, "dram-always")])
def test_invariants_other_machines(tiers, alloc):
    sim, pol, rec = run_small(tiers=tiers, alloc=alloc, work=1e7, phases=2, grow=HP,
                              free_first=HP // 2)
    check_invariants(sim)
    assert sim.mem.allocated == 16 * HP + HP - HP // 2
    assert rec["promotions"] > 0
    assert pol.top == 0 and pol.lower == list(sim.machine.demotion)[1:]


def test_deterministic_per_seed():
    a = run_small(seed=3, work=5e6)[2]
    b = run_small(seed=3, work=5e6)[2]
    c = run_small(seed=4, work=5e6)[2]
    keys = ("throughput", "promotions", "demotions", "policy_stats")
    assert all(a[k] == b[k] for k in keys)
    assert a["policy_stats"] != c["policy_stats"]


# -----------------------------------------------------------------------------------
# Sample period against the CPU quota (htmm_sampler.c)
# -----------------------------------------------------------------------------------
def test_period_steps_against_the_quota(small):
    _, pol, _ = small
    mon = pol.monitor
    pol.li = pol.si = 0
    pol.cputime = 0
    w = pol.cpu_window * pol.fscale  # one full-scale CPU over the window

    def window(permille):
        mon.cpu_seconds = pol._cpu_last + w * permille / 1000
        pol._adapt_period(0.0)

    window(100)  # first window: EMA 0.8 x 100 = 80 > 35: one step up
    assert pol.cputime == 80 and (pol.li, pol.si) == (1, 1)
    assert mon.period == {"fast_load": LOAD_PERIODS[1], "slow_load": LOAD_PERIODS[1],
                          "store": STORE_PERIODS[1]}
    assert mon.sampler.period == mon.period  # what the next poll draws with
    window(33)  # within 30 +- 5: no change
    assert (pol.li, pol.si) == (1, 1)
    for _ in range(6):
        window(200)
    assert pol.li == 7 and pol.si == len(STORE_PERIODS) - 1  # stores saturate
    window(10)
    assert pol.li == 6 and pol.si == len(STORE_PERIODS) - 2
    assert mon.period["fast_load"] == LOAD_PERIODS[6]


@pytest.mark.parametrize("quota,rises", [(1, True), (1000, False)])
def test_period_adapts_when_the_quota_is_exceeded(quota, rises):
    _, pol, rec = run_small(f"memtis:quota={quota},cpu_window=2s", work=1e7)
    p = rec["policy_stats"]["load_period"]
    assert (p > LOAD_PERIODS[0]) is rises
    if rises:
        assert rec["policy_stats"]["period_changes"] >= 2


# -----------------------------------------------------------------------------------
# Huge-page splitting: a skewed huge page is split, a uniform one is not
# -----------------------------------------------------------------------------------
def test_skewed_huge_page_split_uniform_not(small):
    sim, pol, _ = small
    pol._do_splits(sim.now)  # drain what the run queued
    alive = np.flatnonzero(pol.alive & ~pol.split)
    a, b = int(alive[0]), int(alive[1])  # a: skewed, b: uniform, the same total
    for h in alive:
        pol.cnt[h * HP:(h + 1) * HP] = 0
        pol.meta[h] = 0
        pol.hclk[h] = pol.pclk[h * HP:(h + 1) * HP] = pol.clock
    pol.cnt[a * HP:a * HP + 16] = 32 * HP  # 16 subpages with 32 samples each
    pol.cnt[b * HP:(b + 1) * HP] = HP  # every subpage one sample
    pol.meta[a] = pol.meta[b] = 512
    pol.active = pol.bp_active = 5  # cooling lowers the base-page threshold to 4
    pol.split_enabled, pol.need_split, pol.split_happen = True, False, False
    pol.need_cooling = pol.need_adjusting = False
    pol.queued[:] = False
    # a cooling round that asks for a split (samples since the last decision exceed
    # max(RSS/4, fast pages)), with eHR - rHR = 3/4 of the samples per cooling window
    # (nr_records): with sum_util / avg = 2 huge pages the budget is 1 x (270 - 80) //
    # 80 x 512 x 0.4 = 409 pages, less than one huge page: the top skew bin only
    pol.nr_sampled_for_split = 10 ** 9
    c = pol.cool_every
    nr_records = 2 * c - (c >> pol.clock)  # the clock after this cooling, minus 1
    pol.max_dram_sampled = -(-3 * nr_records // 4 * 100 // 95) + 1
    pol.nr_dram_sampled = 0
    pol.prev_max_dram_sampled = pol.prev_dram_sampled = 0
    pol._cooling()
    assert pol.need_split and pol.cooled
    pol._rescan()  # kmigraterd's rescan: skewness per huge page
    assert pol.skew[a] == 20 and pol.skew[b] <= 7
    pol._adjust_threshold()  # cooled: the split budget and skew threshold
    assert (pol.nr_split, pol.nr_split_tail, pol.split_threshold) == (0, 409, 21)
    pol.need_adjusting = True
    pol._rescan()  # the re-sort queues by skew
    assert pol.queued[a] and not pol.queued[b]
    before = pol.splits
    pol._do_splits(sim.now)
    assert pol.split[a] and not pol.split[b] and pol.splits == before + 1
    # the base pages keep their subpage counts
    assert pol.cnt[a * HP] == 32 * HP >> 1 and pol.cnt[a * HP + 16] == 0


class Scattered(Workload):
    """n pages; every `every`-th page is hot (`hot_frac` of the accesses): each 2 MiB
    page holds 32 hot 4 KiB pages, so the hot huge pages (all of them) do not fit the
    fast tier while the hot 4 KiB pages do (GUPS++'s pattern, Johnny Cache)."""

    def __init__(self, n=16 * HP, every=16, hot_frac=0.9, work=4e7):
        super().__init__(name="scattered", npages=n, footprint_pages=n, total_work=work,
                         work_unit="updates", compute_ns=10.0, threads=8, mlp=4.0)
        self.hot = np.arange(every // 2, n, every)
        self.hot_frac = hot_frac

    def changes(self):
        n, hot = self.npages, self.hot
        cold = (1 - self.hot_frac) / (n - hot.size)
        starts = np.concatenate(([0], hot + 1, hot))
        ends = np.concatenate((hot, [n], hot + 1))
        rate = np.concatenate((np.full(hot.size + 1, cold),
                               np.full(hot.size, self.hot_frac / hot.size)))
        o = np.argsort(starts, kind="stable")
        starts, ends, rate = starts[o], ends[o], rate[o]
        keep = ends > starts
        f = RateField.from_segments(starts[keep], ends[keep], rate[keep], rate[keep], n)
        yield Change(0, field=f, alloc=ranges((0, n)))


def test_scattered_hot_pages_are_placed_by_splitting():
    """End to end: the split rounds (eHR > rHR) split the skewed huge pages, whose hot
    subpages then fit the fast tier; without splitting half of them stay slow."""
    out = {}
    for spec in ("memtis", "memtis:split=off"):
        m = small_machine(dram_pages=8 * HP, slow_pages=32 * HP)
        wl = Scattered()
        pol = POLICIES.create(spec)
        sim = Simulation(m, wl, pol, ALLOCS.create("dram-preferred"), seed=0, scale=SCALE)
        rec = sim.run()
        check_invariants(sim)
        out[spec] = (np.mean(sim.mem.node[wl.hot] == 0), rec)
    (on, rec), (on_off, rec_off) = out["memtis"], out["memtis:split=off"]
    assert rec["policy_stats"]["splits"] >= 8 and rec_off["policy_stats"]["splits"] == 0
    assert on > 0.95 and on_off < 0.6
    assert rec["throughput"] > 1.1 * rec_off["throughput"]


def _scattered_run():
    m = small_machine(dram_pages=8 * HP, slow_pages=32 * HP)
    sim = Simulation(m, Scattered(), POLICIES.create("memtis"),
                     ALLOCS.create("dram-preferred"), seed=0, scale=SCALE)
    rec = sim.run()
    check_invariants(sim)
    rec.pop("wall_seconds", None)
    return rec


def test_split_pages_by_chunks_are_the_whole_maps(monkeypatch):
    """The base pages of split huge pages are taken a chunk at a time (cooling, the
    histogram, the units: most of 134 M pages after a long run at 512 GiB): with chunks
    of two huge pages a run that splits is the same, record for record, as with one
    chunk; and the units a caller keeps are exactly those of all units its filter
    passes, in the same order."""
    from tierlab.policies.memtis import policy as m
    whole = _scattered_run()
    monkeypatch.setattr(m, "_CHUNK", 2 * HP)
    seen = {"base": 0}
    orig = m.Memtis._units

    def check(self, keep=None):
        got = orig(self, keep)
        if keep is not None:
            every = orig(self)
            sel = keep(every[2], every[4], every[5])
            for a, b in zip(got, every):
                np.testing.assert_array_equal(a, b[sel])
            seen["base"] += int((~every[1]).sum() > 2 * HP)  # more than one chunk
        return got

    monkeypatch.setattr(m.Memtis, "_units", check)
    chunked = _scattered_run()
    assert chunked["policy_stats"]["splits"] >= 8 and seen["base"] > 0
    assert chunked == whole


def test_split_rounds_stop_without_gain(small):
    _, pol, _ = small
    pol.split_enabled, pol.need_split, pol.split_happen = True, False, True
    pol.need_cooling = False
    pol.nr_sampled_for_split = 10 ** 9
    pol.prev_dram_sampled, pol.nr_dram_sampled = 1000, 500  # rHR 1000 -> 1000: < +3%
    pol._cooling()
    assert not pol.split_enabled and not pol.need_split


# -----------------------------------------------------------------------------------
# Parameters
# -----------------------------------------------------------------------------------
@pytest.mark.parametrize("spec,needle", [
    ("memtis:quota=2000", r"quota '2000': must be in \[0, 1000\]"),
    ("memtis:thres_hot=0", r"thres_hot '0'.*\[1, 15\]"),
    ("memtis:load_period=fast", "load_period 'fast'"),
    ("memtis:gamma=11", r"gamma '11'.*\[0, 10\]"),
    ("memtis:latency=hbm", "auto, nvm, cxl"),
    ("memtis:interval=0s", "interval"),
    ("memtis:warm=maybe", "warm"),
    ("memtis:core=gpu", "dedicated, shared"),
    ("memtis:cooling_alloc=lots", "cooling_alloc"),
])
def test_bad_values(spec, needle):
    with pytest.raises(TierlabError, match=needle):
        POLICIES.create(spec)


def test_refused_on_the_linux_backend():
    """MEMTIS needs PEBS samples: the Linux backend (`real`) has none for user space."""
    class Real:
        real = True

    with pytest.raises(TierlabError, match="memtis: needs PEBS"):
        POLICIES.create("memtis").attach(Real())


def _attached(dram_pages, spec="memtis"):
    pol = POLICIES.create(spec)
    sim = Simulation(small_machine(dram_pages=dram_pages, slow_pages=3000),
                     HotCold(n=3000, hot=300, work=1e6), pol,
                     ALLOCS.create("dram-preferred"))
    pol.attach(sim.policy_view)
    return pol


@pytest.mark.parametrize("floors,promo,demo", [("kernel", 25600, 12800),
                                                ("paper", 900 * 25600 // (740 * 256),
                                                 900 * 12800 // (740 * 256))])
def test_watermark_floors_on_a_tiny_fast_tier(floors, promo, demo):
    """3% / 2% of the fast tier with the kernel's 100 MiB / 50 MiB floors; `floors=paper`
    caps a floor at its share of the paper's smallest fast tier (740 MB)."""
    pol = _attached(900, f"memtis:floors={floors}")
    assert (pol.promo_wmark, pol.demo_wmark) == (promo, demo)


def test_watermarks_of_a_large_fast_tier_are_the_kernels():
    pol = _attached(8 << 18)  # 8 GiB: 3% = 245 MB, 2% = 163 MB, within the clamps
    assert (pol.promo_wmark, pol.demo_wmark) == ((8 << 18) * 3 // 100, (8 << 18) * 2 // 100)


def test_kept_bins_equal_a_full_count_at_every_use(monkeypatch):
    """The per-page bins kept through every write of cnt and pclk (samples, lazy
    cooling, first touches, frees, splits) equal a full pass over the page map each time
    `histograms` reads them; clock ticks drop them (recounted)."""
    from tierlab.policies import memtis as m
    seen = {"kept": 0}
    orig = m.Memtis.histograms

    def check(self):
        if self._ebins is not None:
            full = cooled_bins(self.cnt, self.pclk, self.clock, m.MAX_SHIFT, m.NBINS)
            np.testing.assert_array_equal(self._ebins, full)
            seen["kept"] += 1
        return orig(self)

    monkeypatch.setattr(m.Memtis, "histograms", check)
    sim, pol, _ = run_small()
    assert seen["kept"] > 20, seen
    # splits (rare in a short run): queue every live huge page, split, read again
    pol.histograms()
    pol.queued[:] = pol.alive
    pol.split_per_pass = pol.nh
    before = pol.splits
    pol._do_splits(sim.now)
    assert pol.splits > before and pol._ebins is not None
    check(pol)
